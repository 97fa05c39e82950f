// `batchRoute`'s options say in their types what the run time says: `handler` with batcher options, or `batcher`
// alone (the `@ts-expect-error` lines fail `pnpm typecheck` if they ever type-check again); and a route whose default
// `input` finds no body answers 400 naming `jsonBody()`, never `undefined` handed to the handler with a 200.
import { createBatcher } from '@microbatch/core';
import type { BatchRouteOptions } from '@microbatch/core/http';
import * as expressAdapter from '@microbatch/express';
import * as fastifyAdapter from '@microbatch/fastify';
import * as honoAdapter from '@microbatch/hono';
import * as koaAdapter from '@microbatch/koa';
import { type TestServer, listen } from '@microbatch/test-kit';
import express from 'express';
import Koa from 'koa';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';

const handler = async (inputs: unknown[]) => inputs.map((input) => ({ echo: input }));
const batcher = createBatcher(handler);
const servers: TestServer[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

describe('batchRoute options', () => {
  it('Express: type-check for exactly one of the two forms, and throw the same TypeErrors at run time', () => {
    const { batchRoute } = expressAdapter;
    // @ts-expect-error neither `handler` nor `batcher`
    expect(() => batchRoute({})).toThrow('needs exactly one of `handler` and `batcher`, got neither');
    // @ts-expect-error both `handler` and `batcher`
    expect(() => batchRoute({ batcher, handler })).toThrow('got both');
    // @ts-expect-error batcher options beside an existing `batcher` (it was configured when it was created)
    expect(() => batchRoute({ batcher, maxBatchSize: 4 })).toThrow(TypeError);
    // The two forms that do type-check.
    expect(batchRoute({ handler, maxBatchSize: 4 }).batcher.maxBatchSize).toBe(4);
    expect(batchRoute({ batcher }).batcher).toBe(batcher);
  });

  it('Koa: the same', () => {
    const { batchRoute } = koaAdapter;
    // @ts-expect-error neither `handler` nor `batcher`
    expect(() => batchRoute({})).toThrow('needs exactly one of `handler` and `batcher`, got neither');
    // @ts-expect-error both `handler` and `batcher`
    expect(() => batchRoute({ batcher, handler })).toThrow('got both');
    // @ts-expect-error batcher options beside an existing `batcher` (it was configured when it was created)
    expect(() => batchRoute({ batcher, maxBatchSize: 4 })).toThrow(TypeError);
    expect(batchRoute({ handler, maxBatchSize: 4 }).batcher.maxBatchSize).toBe(4);
    expect(batchRoute({ batcher }).batcher).toBe(batcher);
  });

  // Fastify and Hono take core's same strict `BatchRouteOptions` (they used to check only at run time).
  it('Fastify: the same', () => {
    const { batchRoute } = fastifyAdapter;
    // @ts-expect-error neither `handler` nor `batcher`
    expect(() => batchRoute({})).toThrow('needs exactly one of `handler` and `batcher`, got neither');
    // @ts-expect-error both `handler` and `batcher`
    expect(() => batchRoute({ batcher, handler })).toThrow('got both');
    // @ts-expect-error batcher options beside an existing `batcher` (it was configured when it was created)
    expect(() => batchRoute({ batcher, maxBatchSize: 4 })).toThrow(TypeError);
    expect(batchRoute({ handler, maxBatchSize: 4 }).batcher.maxBatchSize).toBe(4);
    expect(batchRoute({ batcher }).batcher).toBe(batcher);
  });

  it('Hono: the same', () => {
    const { batchRoute } = honoAdapter;
    // @ts-expect-error neither `handler` nor `batcher`
    expect(() => batchRoute({})).toThrow('needs exactly one of `handler` and `batcher`, got neither');
    // @ts-expect-error both `handler` and `batcher`
    expect(() => batchRoute({ batcher, handler })).toThrow('got both');
    // @ts-expect-error batcher options beside an existing `batcher` (it was configured when it was created)
    expect(() => batchRoute({ batcher, maxBatchSize: 4 })).toThrow(TypeError);
    expect(batchRoute({ handler, maxBatchSize: 4 }).batcher.maxBatchSize).toBe(4);
    expect(batchRoute({ batcher }).batcher).toBe(batcher);
  });

  it("is one type: each adapter's options are core's `BatchRouteOptions` over the adapter's own hooks", () => {
    expectTypeOf<fastifyAdapter.BatchRouteOptions<string, number>>().toEqualTypeOf<
      BatchRouteOptions<string, number, fastifyAdapter.BatchRouteHooks<string, number>>
    >();
    expectTypeOf<honoAdapter.BatchRouteOptions<string, number>>().toEqualTypeOf<
      BatchRouteOptions<string, number, honoAdapter.BatchRouteHooks<string, number>>
    >();
    expectTypeOf<expressAdapter.BatchRouteOptions<string, number>>().toEqualTypeOf<
      BatchRouteOptions<string, number, expressAdapter.BatchRouteHooks<string, number>>
    >();
    expectTypeOf<koaAdapter.BatchRouteOptions<string, number>>().toEqualTypeOf<
      BatchRouteOptions<string, number, koaAdapter.BatchRouteHooks<string, number>>
    >();
  });
});

/** Sends `init` to `path` and returns the status and JSON body. */
async function send(server: TestServer, init: RequestInit): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${server.url}/echo`, init);
  return { status: response.status, body: await response.json() };
}

const NOT_READ = {
  error: {
    code: 'INVALID_INPUT',
    message: expect.stringContaining('mount `jsonBody()`') as unknown,
    details: { field: 'body' },
  },
};
const NONE = {
  error: { code: 'INVALID_INPUT', message: 'Expected a JSON request body, got none', details: { field: 'body' } },
};
const JSON_POST = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' };

describe('a route with the default `input` and no body', () => {
  it('Express: 400 naming jsonBody() when nothing read the body, 400 when none was sent, 200 with jsonBody()', async () => {
    const app = express();
    app.post('/echo', expressAdapter.batchRoute({ handler }));
    app.get('/echo', expressAdapter.jsonBody(), expressAdapter.batchRoute({ handler }));
    app.put('/echo', expressAdapter.jsonBody(), expressAdapter.batchRoute({ handler }));
    app.use(expressAdapter.batchErrorHandler());
    const server = await listen(app);
    servers.push(server);
    expect(await send(server, JSON_POST)).toEqual({ status: 400, body: NOT_READ });
    expect(await send(server, { method: 'GET' })).toEqual({ status: 400, body: NONE });
    expect(await send(server, { ...JSON_POST, method: 'PUT' })).toEqual({ status: 200, body: { echo: { a: 1 } } });
  });

  it('Koa: the same', async () => {
    const app = new Koa();
    const parse = koaAdapter.jsonBody();
    const route = koaAdapter.batchRoute({ handler });
    app.use((ctx, next) => (ctx.method === 'POST' ? next() : parse(ctx, next)));
    app.use(route);
    const callback = app.callback();
    const server = await listen((req, res) => void callback(req, res));
    servers.push(server);
    expect(await send(server, JSON_POST)).toEqual({ status: 400, body: NOT_READ });
    expect(await send(server, { method: 'GET' })).toEqual({ status: 400, body: NONE });
    expect(await send(server, { ...JSON_POST, method: 'PUT' })).toEqual({ status: 200, body: { echo: { a: 1 } } });
  });
});
