import { deferred, waitFor } from '@microbatch/test-kit';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GatedHandler, ProcessErrorSpy, ResponseRecorder } from '../helpers/adapter-http.js';
import { DRIVERS, type Driver, type NeutralRequest, closeServers } from './drivers.js';

const processErrors = new ProcessErrorSpy();
beforeAll(() => processErrors.install());
afterAll(() => processErrors.uninstall());

afterEach(async () => {
  await closeServers();
  expect(processErrors.errors).toEqual([]);
});

/**
 * An adder app whose responses are recorded (to check listeners) and whose `output` calls are counted;
 * `beforeRoute` runs in a middleware just before `batchRoute` (an async auth check, say).
 */
async function adderApp(
  driver: Driver,
  {
    input = (req) => req.body.number as number,
    beforeRoute = async () => undefined,
  }: {
    input?: (req: NeutralRequest) => number | Promise<number>;
    beforeRoute?: () => Promise<void>;
  } = {},
) {
  const model = new GatedHandler((n: number) => n + 1);
  const responses = new ResponseRecorder();
  const outputs: number[] = [];
  const route = driver.route<number, number>({
    input,
    handler: model.handler,
    output: (result, _req, reply) => {
      outputs.push(result);
      reply.json(result);
    },
  });
  const { url } = await driver.serve({
    routes: [{ method: 'post', path: '/adder', route }],
    beforeRoute: async (res) => {
      responses.record(res);
      await beforeRoute();
    },
  });
  const post = (number: number) =>
    request(url)
      .post('/adder')
      .send({ number })
      .then((response) => response);
  const abortable = (number: number) => {
    const controller = new AbortController();
    const response = fetch(`${url}/adder`, {
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

describe.each(DRIVERS.map((driver) => [driver.name, driver] as const))(
  'batchRoute (%s): client disconnects',
  (_name, driver) => {
    it('removes a queued item whose client disconnects: it never reaches the handler', async () => {
      const { model, route, outputs, responses, post, abortable, allClosed } = await adderApp(driver);

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
      const { model, route, outputs, responses, post, abortable, allClosed } = await adderApp(driver);

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
      const { model, route, outputs, abortable, allClosed, responses } = await adderApp(driver);

      const gone = abortable(7);
      await waitFor('the batch to start', () => model.batches.length === 1);
      gone.abort();
      await waitFor("the handler's signal to abort", () => model.signals[0]?.aborted === true);
      model.release(true);

      expect(await gone.response).toBe('AbortError');
      expect((model.signals[0]?.reason as Error | undefined)?.message).toBe('The client closed the connection');
      await waitFor('every response to close', allClosed);
      expect(outputs).toEqual([]);
      expect(responses.leaked()).toBe(0);
      expect(responses.writesAfterEnd).toEqual([]);
      await waitFor('the batch to finish', () => route.batcher.inFlightBatches === 0);
    });

    it('never enqueues a request whose client disconnected while `input` was still running', async () => {
      const inputStarted = deferred();
      const inputGate = deferred();
      const { model, route, abortable, allClosed, responses } = await adderApp(driver, {
        input: async (req) => {
          inputStarted.resolve();
          await inputGate.promise;
          return req.body.number as number;
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
      const { model, route, abortable, allClosed, responses } = await adderApp(driver, {
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
  },
);
