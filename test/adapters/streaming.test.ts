import { connect } from 'node:net';
import { type BatchContext, END, exposeError } from '@microbatch/core';
import { type Deferred, deferred, readSse, sseValues, waitFor } from '@microbatch/test-kit';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ProcessErrorSpy, ResponseRecorder } from '../helpers/adapter-http.js';
import { DRIVERS, type Driver, closeServers } from './drivers.js';

const processErrors = new ProcessErrorSpy();
beforeAll(() => processErrors.install());
afterAll(() => processErrors.uninstall());

afterEach(async () => {
  await closeServers();
  expect(processErrors.errors).toEqual([]);
});

/**
 * A token generator the test steps by hand: step `i` is yielded only once `steps[i]` resolves. Prompt "fail@k"
 * fails its own stream at step k; prompts "throw" and "throw exposed" make the handler throw before any step.
 */
function steppedModel() {
  const steps: Deferred<void>[] = Array.from({ length: 3 }, () => deferred());
  const batches: string[][] = [];
  const signals: AbortSignal[] = [];
  async function* handler(prompts: string[], context: BatchContext) {
    batches.push(prompts);
    signals.push(context.signal);
    if (prompts.includes('throw')) throw new Error('secret: weights not loaded');
    if (prompts.includes('throw exposed')) throw exposeError(new Error('model is warming up'));
    for (let step = 0; step < steps.length; step += 1) {
      await steps[step]?.promise;
      yield prompts.map((prompt) =>
        prompt === `fail@${step}` ? new Error('secret: NaN in logits') : `${prompt}#${step}`,
      );
    }
    yield prompts.map(() => END);
  }
  return { steps, batches, signals, handler, releaseAll: () => steps.forEach((step) => step.resolve()) };
}
let model: ReturnType<typeof steppedModel>;

async function streamingApp(driver: Driver) {
  model = steppedModel();
  const responses = new ResponseRecorder();
  const reported: unknown[] = [];
  const route = driver.route<string, string>({
    input: (req) => {
      const { prompt } = (req.body ?? {}) as { prompt?: unknown };
      if (typeof prompt !== 'string') throw new Error('`prompt` must be a string');
      return prompt;
    },
    handler: model.handler,
    maxBatchSize: 4,
    batchWaitTimeoutMs: 20,
    onError: (problem) => reported.push(problem),
  });
  const { url, appErrors } = await driver.serve({
    routes: [{ method: 'post', path: '/generate', route }],
    beforeRoute: async (res) => responses.record(res),
  });
  const open = (prompt: string, signal?: AbortSignal) =>
    fetch(`${url}/generate`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt }),
      signal,
    });
  return { route, responses, open, reported, appErrors, url };
}

describe.each(DRIVERS.map((driver) => [driver.name, driver] as const))(
  'batchRoute (%s): streaming',
  (_name, driver) => {
    it('streams each caller its own values as Server-Sent Events, flushed as produced, then [DONE]', async () => {
      const { open } = await streamingApp(driver);

      const pendingA = open('a');
      const pendingB = open('b');
      await waitFor('the batch to start', () => model.batches.length === 1);
      model.steps[0]?.resolve();
      // Step k+1 is produced only after client "a" has received step k: the test would hang if events were held back.
      const a = await pendingA.then(async (response) => ({
        response,
        messages: await readSse(response, (_message, seen) => model.steps[seen + 1]?.resolve()),
      }));
      const b = await pendingB.then(async (response) => ({ response, messages: await readSse(response) }));

      expect(model.batches).toHaveLength(1);
      expect(model.batches[0]?.toSorted()).toEqual(['a', 'b']);
      for (const [prompt, { response, messages }] of [
        ['a', a],
        ['b', b],
      ] as const) {
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
        expect(response.headers.get('cache-control')).toBe('no-cache, no-transform');
        expect(response.headers.get('x-batch-size')).toBe('2');
        expect(sseValues(messages)).toEqual({ values: [`${prompt}#0`, `${prompt}#1`, `${prompt}#2`], done: true });
      }
    });

    it("honours a client's `Connection: close`: the socket is closed once the stream has ended", async () => {
      const { url } = await streamingApp(driver);
      model.releaseAll();
      const { port } = new URL(url);
      const body = JSON.stringify({ prompt: 'a' });
      const received = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1');
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString()));
        socket.on('error', reject);
        // Resolves only when the server closes the connection: a kept-alive socket would hang the test.
        socket.on('close', () => resolve(text));
        socket.write(
          `POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
        );
      });
      expect(received).toMatch(/^HTTP\/1\.1 200 /);
      expect(received.toLowerCase()).toContain('connection: close');
      expect(received.toLowerCase()).not.toContain('connection: keep-alive');
      expect(received).toContain('data: [DONE]');
    });

    it('answers a failure before the first value with a plain JSON error, and reports the hidden one', async () => {
      const { url, reported, appErrors } = await streamingApp(driver);

      const hidden = await request(url).post('/generate').send({ prompt: 'throw' });
      const exposed = await request(url).post('/generate').send({ prompt: 'throw exposed' });
      const invalid = await request(url).post('/generate').send({ prompt: 42 });

      expect(hidden.status).toBe(500);
      expect(hidden.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(hidden.body).toEqual({ error: { code: 'HANDLER_ERROR', message: 'Internal Server Error' } });
      expect([exposed.status, exposed.body]).toEqual([
        500,
        { error: { code: 'HANDLER_ERROR', message: 'model is warming up' } },
      ]);
      expect([invalid.status, invalid.body]).toEqual([
        400,
        { error: { code: 'INVALID_INPUT', message: '`prompt` must be a string' } },
      ]);
      expect((reported[0] as Error).message).toBe('secret: weights not loaded');
      expect(appErrors).toEqual([]);
    });

    it('ends a stream that fails midway with an `error` event and no [DONE]; its batch-mates are unaffected', async () => {
      const { open } = await streamingApp(driver);

      const failing = open('fail@1');
      const healthy = open('ok');
      await waitFor('the batch to start', () => model.batches.length === 1);
      model.releaseAll();
      const [failed, fine] = await Promise.all([failing.then((r) => readSse(r)), healthy.then((r) => readSse(r))]);

      expect(failed).toEqual([
        { event: undefined, data: '"fail@1#0"' },
        { event: 'error', data: '{"error":{"code":"HANDLER_ERROR","message":"Internal Server Error"}}' },
      ]);
      expect(sseValues(fine)).toEqual({ values: ['ok#0', 'ok#1', 'ok#2'], done: true });
    });

    it("stops only the disconnecting caller's stream; the others complete", async () => {
      const { route, open, responses } = await streamingApp(driver);

      const controller = new AbortController();
      const leaving = open('leaving', controller.signal);
      const staying = open('staying');
      await waitFor('the batch to start', () => model.batches.length === 1);
      model.steps[0]?.resolve();
      const left = await readSse(await leaving, () => false);
      controller.abort();
      await waitFor('the cancellation', () => route.batcher.stats().rejected.CANCELLED === 1);
      model.steps[1]?.resolve();
      model.steps[2]?.resolve();
      const stayed = await readSse(await staying);

      expect(sseValues(left).values).toEqual(['leaving#0']);
      expect(sseValues(stayed)).toEqual({ values: ['staying#0', 'staying#1', 'staying#2'], done: true });
      expect(model.signals[0]?.aborted).toBe(false);
      await waitFor('every response to close', () => responses.entries.every(({ res }) => res.closed));
      expect(responses.leaked()).toBe(0);
      expect(responses.writesAfterEnd).toEqual([]);
      await waitFor('the batch to finish', () => route.batcher.inFlightBatches === 0);
    });

    it("aborts the handler's signal when the only streaming client disconnects", async () => {
      const { route, open } = await streamingApp(driver);

      const controller = new AbortController();
      const leaving = open('alone', controller.signal);
      await waitFor('the batch to start', () => model.batches.length === 1);
      model.steps[0]?.resolve();
      await readSse(await leaving, () => false);
      controller.abort();

      await waitFor("the handler's signal to abort", () => model.signals[0]?.aborted === true);
      model.releaseAll();
      await waitFor('the batch to finish', () => route.batcher.inFlightBatches === 0);
      expect(route.batcher.stats().rejected.CANCELLED).toBe(1);
    });
  },
);
