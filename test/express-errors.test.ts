import { BatchError, createBatcher, createStreamingBatcher, exposeError } from '@microbatch/core';
import { batchErrorHandler, batchRoute } from '@microbatch/express';
import express, { type Request } from 'express';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import { GatedHandler, type TestServer, jsonParseMessage, listen, waitFor } from './helpers/adapter-http.js';

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function serve(app: express.Express): Promise<string> {
  const server = await listen(app);
  servers.push(server);
  return server.url;
}

function parseNumber(req: Request): number {
  if (!req.is('application/json')) throw new BatchError('UNSUPPORTED_MEDIA_TYPE', 'Expected an application/json body');
  const value = (req.body as { number?: unknown }).number;
  if (value === undefined) throw new Error('`number` is required');
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new Error('`number` must be an integer');
  return value;
}

const error = (code: string, message: string) => ({ error: { code, message } });

/** An adder app with body limits and the error handler, as a user would write it. */
async function adderApp(model: GatedHandler<number, number>, options: Parameters<typeof batchRoute<number, number>>[0] = {}) {
  const route = batchRoute<number, number>({ input: parseNumber, handler: model.handler, ...options });
  const app = express();
  app.post('/adder', express.json({ limit: 64 }), route);
  app.use(batchErrorHandler());
  return { route, url: await serve(app) };
}

describe('batchRoute (Express): errors', () => {
  it('answers request problems with exact 4xx JSON errors and keeps serving', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    model.release(true);
    const { url } = await adderApp(model);
    const post = () => request(url).post('/adder');

    const malformed = await post().set('Content-Type', 'application/json').send('{"number": 1,}');
    expect([malformed.status, malformed.body]).toEqual([400, error('INVALID_INPUT', jsonParseMessage('{"number": 1,}'))]);

    const missing = await post().send({});
    expect([missing.status, missing.body]).toEqual([400, error('INVALID_INPUT', '`number` is required')]);

    const mistyped = await post().send({ number: 'seven' });
    expect([mistyped.status, mistyped.body]).toEqual([400, error('INVALID_INPUT', '`number` must be an integer')]);

    const wrongType = await post().set('Content-Type', 'text/plain').send('{"number": 1}');
    expect([wrongType.status, wrongType.body]).toEqual([415, error('UNSUPPORTED_MEDIA_TYPE', 'Expected an application/json body')]);

    const charset = await post().set('Content-Type', 'application/json; charset=latin1').send('{"number": 1}');
    expect([charset.status, charset.body]).toEqual([415, error('UNSUPPORTED_MEDIA_TYPE', 'unsupported charset "LATIN1"')]);

    const oversize = await post().send({ number: 1, padding: 'x'.repeat(100) });
    expect([oversize.status, oversize.body]).toEqual([413, error('ITEM_TOO_LARGE', 'request entity too large')]);

    const fine = await post().send({ number: 1 });
    expect([fine.status, fine.body]).toEqual([200, 2]);
    expect(model.inputs).toEqual([1]);
  });

  it('answers QUEUE_FULL with 503 and Retry-After', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    const { route, url } = await adderApp(model, { name: 'adder', maxQueueSize: 1, retryAfterSeconds: 7 });

    const busy = request(url).post('/adder').send({ number: 1 }).then((response) => response);
    await waitFor('the first batch to start', () => model.batches.length === 1);
    const queued = request(url).post('/adder').send({ number: 2 }).then((response) => response);
    await waitFor('1 queued request', () => route.batcher.queueLength === 1);
    const refused = await request(url).post('/adder').send({ number: 3 });
    model.release(true);

    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('7');
    expect(refused.body).toEqual(error('QUEUE_FULL', 'Batcher "adder" queue is full (maxQueueSize = 1)'));
    expect((await busy).body).toBe(2);
    expect((await queued).body).toBe(3);
    expect(model.inputs).toEqual([1, 2]);
  });

  it('answers DEADLINE_EXCEEDED with 504 when a per-request deadline passes in the queue', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    const { url } = await adderApp(model, {
      callOptions: (req) => ({ timeoutMs: req.query.deadline === undefined ? undefined : Number(req.query.deadline) }),
    });

    const busy = request(url).post('/adder').send({ number: 1 }).then((response) => response);
    await waitFor('the first batch to start', () => model.batches.length === 1);
    const late = await request(url).post('/adder?deadline=20').send({ number: 2 });
    model.release(true);

    expect([late.status, late.body]).toEqual([504, error('DEADLINE_EXCEEDED', 'Deadline of 20 ms exceeded while queued')]);
    expect((await busy).status).toBe(200);
    expect(model.inputs).toEqual([1]);
  });

  it('answers ITEM_TOO_LARGE with 413 and its details', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    model.release(true);
    const { url } = await adderApp(model, { cost: (n) => n, maxBatchCost: 100 });

    const response = await request(url).post('/adder').send({ number: 500 });

    expect(response.status).toBe(413);
    expect(response.body).toEqual({
      error: { code: 'ITEM_TOO_LARGE', message: 'Item cost 500 exceeds maxBatchCost 100', details: { cost: 500, maxBatchCost: 100 } },
    });
    expect(model.batches).toEqual([]);
  });

  it('fails only the item whose result is an Error, with a generic 500 that leaks neither message nor stack', async () => {
    const model = new GatedHandler((n: number) => (n === 13 ? new Error('secret: GPU 3 fell over') : n + 1));
    const { route, url } = await adderApp(model);

    const busy = request(url).post('/adder').send({ number: 0 }).then((response) => response);
    await waitFor('the first batch to start', () => model.batches.length === 1);
    const [ok, bad] = [12, 13].map((number) => request(url).post('/adder').send({ number }).then((response) => response));
    await waitFor('2 queued requests', () => route.batcher.queueLength === 2);
    model.release(true);
    const [okResponse, badResponse] = await Promise.all([ok, bad]);
    await busy;

    expect(model.sizes).toEqual([1, 2]);
    expect([okResponse?.status, okResponse?.body]).toEqual([200, 13]);
    expect([badResponse?.status, badResponse?.body]).toEqual([500, error('HANDLER_ERROR', 'Internal Server Error')]);
    expect(badResponse?.text).not.toMatch(/secret|GPU|at /);
  });

  it('shows the message of an error marked with exposeError()', async () => {
    const model = new GatedHandler<number, number>((n: number) => (n === 13 ? exposeError(new Error('13 is unlucky')) : n + 1));
    model.release(true);
    const { url } = await adderApp(model);

    const response = await request(url).post('/adder').send({ number: 13 });

    expect([response.status, response.body]).toEqual([500, error('HANDLER_ERROR', '13 is unlucky')]);
  });

  it('answers 500 for a handler that throws and for an `output` that throws, then keeps serving', async () => {
    let explode = true;
    const handler = async (inputs: number[]) => {
      if (explode) throw new Error('CUDA out of memory at /opt/model.py:12');
      return inputs.map((n) => n + 1);
    };
    const app = express();
    app.post('/adder', express.json(), batchRoute({ input: parseNumber, handler }));
    app.post(
      '/broken-output',
      express.json(),
      batchRoute({
        input: parseNumber,
        handler,
        output: () => {
          throw new Error('template missing');
        },
      }),
    );
    const url = await serve(app);

    const thrown = await request(url).post('/adder').send({ number: 1 });
    explode = false;
    const broken = await request(url).post('/broken-output').send({ number: 1 });
    const fine = await request(url).post('/adder').send({ number: 1 });

    expect([thrown.status, thrown.body]).toEqual([500, error('HANDLER_ERROR', 'Internal Server Error')]);
    expect([broken.status, broken.body]).toEqual([500, error('HANDLER_ERROR', 'Internal Server Error')]);
    expect([fine.status, fine.body]).toEqual([200, 2]);
  });

  it('answers CLOSED with 503 and Retry-After once the batcher is closed', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    model.release(true);
    const { route, url } = await adderApp(model, { name: 'adder' });

    await route.batcher.close();
    const response = await request(url).post('/adder').send({ number: 1 });

    expect(response.status).toBe(503);
    expect(response.headers['retry-after']).toBe('1');
    expect(response.body).toEqual(error('CLOSED', 'Batcher "adder" is closed'));
  });

  it('answers EXECUTION_TIMEOUT with 504', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    const { url } = await adderApp(model, { executionTimeoutMs: 20 });

    const response = await request(url).post('/adder').send({ number: 1 });
    model.release(true);

    expect([response.status, response.body]).toEqual([504, error('EXECUTION_TIMEOUT', 'Batch 1 ran longer than executionTimeoutMs (20 ms)')]);
    expect(model.signals[0]?.aborted).toBe(true);
  });
});

describe('batchErrorHandler (Express)', () => {
  it('renders any error as the JSON shape and hides unexposed messages', async () => {
    const app = express();
    app.get('/bug', () => {
      throw new Error('password=hunter2');
    });
    app.get('/exposed', () => {
      throw Object.assign(new Error('Nope'), { status: 403, expose: true });
    });
    app.use(batchErrorHandler());
    const url = await serve(app);

    const bug = await request(url).get('/bug');
    const exposed = await request(url).get('/exposed');

    expect([bug.status, bug.body]).toEqual([500, error('HANDLER_ERROR', 'Internal Server Error')]);
    expect(bug.text).not.toContain('hunter2');
    // toHttpError maps every other 4xx to INVALID_INPUT (400).
    expect([exposed.status, exposed.body]).toEqual([400, error('INVALID_INPUT', 'Nope')]);
  });
});

describe('batchRoute (Express): misuse', () => {
  const handler = async (inputs: number[]) => inputs;

  it('throws a TypeError naming batchRoute unless exactly one of `handler` and `batcher` is given', () => {
    const batcher = createBatcher(handler);
    expect(() => batchRoute({})).toThrow(new TypeError('`batchRoute` needs exactly one of `handler` and `batcher`, got neither'));
    expect(() => batchRoute({ handler, batcher })).toThrow(
      new TypeError('`batchRoute` needs exactly one of `handler` and `batcher`, got both'),
    );
  });

  it('rejects batcher options next to `batcher`, a non-batcher, bad route functions and bad options', () => {
    const batcher = createBatcher(handler);
    expect(() => batchRoute({ batcher, maxBatchSize: 4, timeoutMs: 10 })).toThrow(
      new TypeError(
        '`batchRoute` got `batcher` together with batcher options (`maxBatchSize`, `timeoutMs`); pass them to `createBatcher()` instead',
      ),
    );
    expect(() => batchRoute({ batcher: handler as never })).toThrow(
      new TypeError('Expected `batcher` to be a batcher from `createBatcher()`, got `function` (function)'),
    );
    expect(() => batchRoute({ handler, input: 'body' as never })).toThrow(
      new TypeError('Expected `input` to be a function, got `"body"` (string)'),
    );
    expect(() => batchRoute(null as never)).toThrow(new TypeError('Expected `batchRoute` options to be an object, got `null` (null)'));
    // Core validates its own options.
    expect(() => batchRoute({ handler, maxBatchSize: 0 })).toThrow(
      new TypeError('Expected `maxBatchSize` to be an integer >= 1, got `0` (number)'),
    );
  });

  it('rejects `output` for a streaming batcher', () => {
    const batcher = createStreamingBatcher(async function* (inputs: number[]) {
      yield inputs;
    });
    expect(() => batchRoute({ batcher, output: () => undefined })).toThrow(
      new TypeError('`batchRoute` got `output` for a streaming batcher: each streamed value is sent as one Server-Sent Event'),
    );
  });
});
