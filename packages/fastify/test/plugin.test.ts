// The Fastify plugin: JSON bodies within Fastify's own `bodyLimit` (server-wide and per route) answered in the
// project's shape, Fastify's own errors mapped, and every route's batcher drained on `app.close()`.
import { createBatcher } from '@microbatch/core';
import { batchRoute, microbatch } from '@microbatch/fastify';
import { GatedHandler } from '../../../test/helpers/adapter-http.js';
import Fastify, { type FastifyInstance, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';

const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

function app(options: FastifyServerOptions = {}): FastifyInstance {
  const created = Fastify({ ...options, logger: false });
  apps.push(created);
  return created;
}

const error = (code: string, message: string, details?: object) => ({
  error: details === undefined ? { code, message } : { code, message, details },
});

describe('microbatch plugin', () => {
  it("reads JSON within Fastify's bodyLimit, the server's and a route's own, and answers 413 in the project's shape", async () => {
    const server = app({ bodyLimit: 100 });
    await server.register(microbatch);
    const handler = async (texts: string[]) => texts.map((text) => text.length);
    const input = (request: FastifyRequest<{ Body: { text: string } }>) => request.body.text;
    server.post('/small', batchRoute({ input, handler }));
    server.post('/tiny', { bodyLimit: 20 }, batchRoute({ input, handler }));

    const fits = await server.inject({ method: 'POST', url: '/small', payload: { text: 'x'.repeat(50) } });
    expect([fits.statusCode, fits.json()]).toEqual([200, 50]);
    expect(fits.headers['x-batch-size']).toBe('1');

    const overServer = await server.inject({ method: 'POST', url: '/small', payload: { text: 'x'.repeat(200) } });
    expect([overServer.statusCode, overServer.json()]).toEqual([
      413,
      error('ITEM_TOO_LARGE', 'The request body is larger than the limit of 100 bytes', { limit: 100 }),
    ]);
    const overRoute = await server.inject({ method: 'POST', url: '/tiny', payload: { text: 'x'.repeat(50) } });
    expect([overRoute.statusCode, overRoute.json()]).toEqual([
      413,
      error('ITEM_TOO_LARGE', 'The request body is larger than the limit of 20 bytes', { limit: 20 }),
    ]);
  });

  it("answers Fastify's own errors (validation, not found, media type) in the project's shape", async () => {
    const server = app();
    await server.register(microbatch);
    server.post(
      '/strict',
      { schema: { body: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } } } },
      batchRoute({ handler: async (bodies: unknown[]) => bodies.map(() => 'ok') }),
    );

    const invalid = await server.inject({ method: 'POST', url: '/strict', payload: {} });
    expect([invalid.statusCode, invalid.json()]).toEqual([
      400,
      error('INVALID_INPUT', "body must have required property 'text'"),
    ]);
    const missing = await server.inject({ method: 'GET', url: '/nope?secret=1' });
    expect([missing.statusCode, missing.json()]).toEqual([404, error('NOT_FOUND', 'No route for GET /nope')]);
    const form = await server.inject({
      method: 'POST',
      url: '/strict',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'text=hi',
    });
    expect([form.statusCode, form.json()]).toEqual([
      415,
      error('UNSUPPORTED_MEDIA_TYPE', 'Expected a JSON body with Content-Type: application/json'),
    ]);
  });

  it('drains every route batcher on app.close(): queued work finishes, then the batchers refuse new work', async () => {
    const model = new GatedHandler((text: string) => text.toUpperCase());
    const shared = createBatcher(model.handler, { maxBatchSize: 4, batchWaitTimeoutMs: 60_000 });
    const server = app();
    await server.register(microbatch);
    const own = batchRoute({ handler: async (texts: string[]) => texts, batchWaitTimeoutMs: 0 });
    server.post('/upper', batchRoute({ input: (request) => (request.body as { text: string }).text, batcher: shared }));
    server.post('/own', own);
    await server.ready();

    const pending = server.inject({ method: 'POST', url: '/upper', payload: { text: 'queued' } });
    await expect.poll(() => shared.queueLength).toBe(1);
    const closing = server.close();
    // The queued item is not dropped: closing waits for it, and it runs once the batcher flushes on close.
    model.release(true);
    await closing;
    const answered = await pending;
    expect([answered.statusCode, answered.json()]).toEqual([200, 'QUEUED']);
    expect(model.inputs).toEqual(['queued']);
    expect([shared.closed, own.batcher.closed]).toEqual([true, true]);
  });

  it('refuses options it does not know how to honour', async () => {
    const server = app();
    await expect(server.register(microbatch, { json: 'yes' as unknown as boolean })).rejects.toThrow(
      new TypeError('Expected `json` of `microbatch` to be a boolean, got `"yes"` (string)'),
    );
    // A misspelt or unknown option would have no effect: refused, naming it (Fastify's own `prefix` is fine).
    await expect(app().register(microbatch, { bodyLimit: 10, prefix: '/v1' } as never)).rejects.toThrow(
      new TypeError(
        "Unknown option `bodyLimit` of `microbatch` (it takes `json`, `notFound` and `onError`; set Fastify's `bodyLimit` on the server or the route)",
      ),
    );
  });
});

describe("batchRoute under Fastify's handlerTimeout", () => {
  it("makes the route's handlerTimeout the item's deadline: the queued item leaves, answered once", async () => {
    const model = new GatedHandler((text: string) => text.length);
    const server = app();
    await server.register(microbatch);
    const route = batchRoute({
      input: (request) => (request.body as { text: string }).text,
      handler: model.handler,
      maxBatchSize: 1,
    });
    server.post('/length', { handlerTimeout: 50 }, route);
    await server.ready();

    // The first request holds the only slot; the second waits in the queue past the route's handlerTimeout.
    const first = server.inject({ method: 'POST', url: '/length', payload: { text: 'held' } });
    await expect.poll(() => model.batches.length).toBe(1);
    const second = await server.inject({ method: 'POST', url: '/length', payload: { text: 'queued' } });
    expect(second.statusCode).toBe(504);
    expect(second.json().error.code).toBe('DEADLINE_EXCEEDED');
    expect(route.batcher.queueLength).toBe(0);
    model.release(true);
    await first;
    // The queued item never reached the handler.
    expect(model.inputs).toEqual(['held']);
  });
});
