import { bodyParser } from '@koa/bodyparser';
import { Router } from '@koa/router';
import { batchRoute } from '@microbatch/koa';
import Koa, { type Next, type ParameterizedContext } from 'koa';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  GatedHandler,
  ProcessErrorSpy,
  ResponseRecorder,
  type TestServer,
  deferred,
  listen,
  waitFor,
} from './helpers/adapter-http.js';

const processErrors = new ProcessErrorSpy();
beforeAll(() => processErrors.install());
afterAll(() => processErrors.uninstall());

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  expect(processErrors.errors).toEqual([]);
});

/**
 * An adder app whose responses are recorded (to check listeners) and whose `output` calls are counted;
 * `beforeRoute` runs in a middleware just before `batchRoute` (an async auth check, say).
 */
async function adderApp({
  input = (ctx) => (ctx.request.body as { number: number }).number,
  beforeRoute = async () => undefined,
}: {
  input?: (ctx: ParameterizedContext) => number | Promise<number>;
  beforeRoute?: () => Promise<void>;
} = {}) {
  const model = new GatedHandler((n: number) => n + 1);
  const responses = new ResponseRecorder();
  const outputs: number[] = [];
  const route = batchRoute({
    input,
    handler: model.handler,
    output: (result: number, ctx: ParameterizedContext) => {
      outputs.push(result);
      ctx.body = result;
    },
  });
  const record = async (ctx: ParameterizedContext, next: Next) => {
    responses.record(ctx.res);
    await beforeRoute();
    await next();
  };
  const router = new Router();
  router.post('/adder', bodyParser(), record, route);
  const app = new Koa();
  app.use(router.routes());
  const server = await listen(app.callback());
  servers.push(server);
  const post = (number: number) => request(server.url).post('/adder').send({ number }).then((response) => response);
  const abortable = (number: number) => {
    const controller = new AbortController();
    const response = fetch(`${server.url}/adder`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ number }),
      signal: controller.signal,
    }).then(
      () => 'answered',
      (error: Error) => error.name,
    );
    return { abort: () => controller.abort(), response };
  };
  const allClosed = () => responses.entries.every(({ res }) => res.closed);
  return { model, route, outputs, responses, post, abortable, allClosed };
}

describe('batchRoute (Koa): client disconnects', () => {
  it('removes a queued item whose client disconnects: it never reaches the handler', async () => {
    const { model, route, outputs, responses, post, abortable, allClosed } = await adderApp();

    const busy = post(0);
    await waitFor('the first batch to start', () => model.batches.length === 1);
    const gone = abortable(1);
    const kept = post(2);
    await waitFor('2 queued requests', () => route.batcher.queueLength === 2);
    gone.abort();
    await waitFor('the cancellation', () => route.batcher.stats().rejected.CANCELLED === 1);
    expect(route.batcher.queueLength).toBe(1);
    model.release(true);

    expect((await busy).body).toBe(1);
    expect((await kept).body).toBe(3);
    expect(await gone.response).toBe('AbortError');
    expect(model.batches).toEqual([[0], [2]]);
    expect(outputs).toEqual([1, 3]);
    await waitFor('every response to close', allClosed);
    expect(responses.entries).toHaveLength(3);
    expect(responses.leaked()).toBe(0);
    expect(responses.writesAfterEnd).toEqual([]);
    expect(route.batcher.stats()).toMatchObject({ queueLength: 0, inFlightBatches: 0, succeeded: 2, cancelled: 1 });
  });

  it('discards the result of a running item whose client disconnects; the rest of its batch is answered', async () => {
    const { model, route, outputs, responses, post, abortable, allClosed } = await adderApp();

    const busy = post(0);
    await waitFor('the first batch to start', () => model.batches.length === 1);
    const gone = abortable(1);
    const kept = post(2);
    await waitFor('2 queued requests', () => route.batcher.queueLength === 2);
    model.release();
    await waitFor('the second batch to start', () => model.batches.length === 2);
    gone.abort();
    await waitFor('the cancellation', () => route.batcher.stats().rejected.CANCELLED === 1);
    // Another caller still wants this batch's results, so the model keeps running.
    expect(model.signals[1]?.aborted).toBe(false);
    model.release(true);

    expect((await busy).body).toBe(1);
    expect((await kept).body).toBe(3);
    expect(await gone.response).toBe('AbortError');
    expect(model.sizes).toEqual([1, 2]);
    expect(outputs).toEqual([1, 3]);
    await waitFor('every response to close', allClosed);
    expect(responses.leaked()).toBe(0);
    expect(responses.writesAfterEnd).toEqual([]);
    expect(route.batcher.stats()).toMatchObject({ queueLength: 0, inFlightBatches: 0 });
  });

  it("aborts the handler's signal when every client of a running batch disconnects", async () => {
    const { model, route, outputs, abortable, allClosed, responses } = await adderApp();

    const gone = abortable(7);
    await waitFor('the batch to start', () => model.batches.length === 1);
    gone.abort();
    await waitFor("the handler's signal to abort", () => model.signals[0]?.aborted === true);
    model.release(true);

    expect(await gone.response).toBe('AbortError');
    expect((model.signals[0]?.reason as Error).message).toBe('The client closed the connection');
    await waitFor('every response to close', allClosed);
    expect(outputs).toEqual([]);
    expect(responses.leaked()).toBe(0);
    expect(responses.writesAfterEnd).toEqual([]);
    await waitFor('the batch to finish', () => route.batcher.inFlightBatches === 0);
  });

  it('never enqueues a request whose client disconnected while `input` was still running', async () => {
    const inputStarted = deferred();
    const inputGate = deferred();
    const { model, route, abortable, allClosed, responses } = await adderApp({
      input: async (ctx) => {
        inputStarted.resolve();
        await inputGate.promise;
        return (ctx.request.body as { number: number }).number;
      },
    });

    const gone = abortable(5);
    await inputStarted.promise;
    gone.abort();
    await waitFor('the response to close', allClosed);
    inputGate.resolve();
    await waitFor('the cancellation', () => route.batcher.stats().rejected.CANCELLED === 1);

    expect(await gone.response).toBe('AbortError');
    expect(model.batches).toEqual([]);
    expect(responses.leaked()).toBe(0);
    expect(responses.writesAfterEnd).toEqual([]);
  });

  it('never enqueues a request whose client disconnected before batchRoute ran', async () => {
    const middlewareStarted = deferred();
    const middlewareGate = deferred();
    const { model, route, abortable, allClosed, responses } = await adderApp({
      beforeRoute: async () => {
        middlewareStarted.resolve();
        await middlewareGate.promise;
      },
    });

    const gone = abortable(5);
    await middlewareStarted.promise;
    gone.abort();
    await waitFor('the response to close', allClosed);
    middlewareGate.resolve();
    await waitFor('the cancellation', () => route.batcher.stats().rejected.CANCELLED === 1);

    expect(await gone.response).toBe('AbortError');
    expect(model.batches).toEqual([]);
    expect(responses.leaked()).toBe(0);
    expect(responses.writesAfterEnd).toEqual([]);
  });
});
