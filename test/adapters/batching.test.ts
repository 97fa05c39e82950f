import { createBatcher } from '@microbatch/core';
import { waitFor } from '@microbatch/test-kit';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import { GatedHandler } from '../helpers/adapter-http.js';
import { DRIVERS, type NeutralRequest, closeServers } from './drivers.js';

afterEach(closeServers);

function parseNumber(req: NeutralRequest): number {
  const value = (req.body as { number?: unknown } | undefined)?.number;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new Error('`number` must be an integer');
  return value;
}

describe.each(DRIVERS.map((driver) => [driver.name, driver] as const))(
  'batchRoute (%s): coalescing',
  (_name, driver) => {
    it('batches 9 concurrent requests as [1, 4, 4] and answers each with its own result and batch headers', async () => {
      const model = new GatedHandler((n: number) => n + 1);
      const route = driver.route({
        input: parseNumber,
        handler: model.handler,
        maxBatchSize: 4,
        batchWaitTimeoutMs: 5,
      });
      const { url } = await driver.serve({ routes: [{ method: 'post', path: '/adder', route }] });

      // Like Ray Serve's adder: the first request finds the handler idle and runs alone; the 8 that arrive while it
      // is busy queue up and then fill two batches of 4.
      const first = request(url)
        .post('/adder')
        .send({ number: 0 })
        .then((response) => response);
      await waitFor('the first batch to start', () => model.batches.length === 1);
      const rest = Array.from({ length: 8 }, (_, index) =>
        request(url)
          .post('/adder')
          .send({ number: index + 1 })
          .then((response) => response),
      );
      await waitFor('8 queued requests', () => route.batcher.queueLength === 8);
      model.release(true);
      const responses = await Promise.all([first, ...rest]);

      expect(model.sizes).toEqual([1, 4, 4]);
      expect(model.inputs.toSorted((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
      responses.forEach((response, number) => {
        expect(response.status).toBe(200);
        expect(response.body).toBe(number + 1);
        expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
        const batchId = Number(response.headers['x-batch-id']);
        const batch = model.batches[batchId - 1];
        expect(batch).toContain(number);
        expect(response.headers['x-batch-size']).toBe(String(batch?.length));
        expect(response.headers['x-queue-time-ms']).toMatch(/^\d+\.\d{2}$/);
      });
      expect(route.batcher.stats()).toMatchObject({
        batchesProcessed: 3,
        itemsProcessed: 9,
        succeeded: 9,
        queueLength: 0,
      });
    });

    it('lets one batcher serve several routes, so their requests share batches', async () => {
      const model = new GatedHandler((text: string) => text.length);
      const batcher = createBatcher(model.handler, { maxBatchSize: 8, batchWaitTimeoutMs: 5 });
      const { url } = await driver.serve({
        routes: [
          { method: 'post', path: '/length', route: driver.route({ input: (req) => String(req.body.text), batcher }) },
          {
            method: 'get',
            path: '/length/:text',
            route: driver.route({ input: (req) => String(req.param('text')), batcher }),
            json: false,
          },
        ],
      });

      const warmup = request(url)
        .get('/length/x')
        .then((response) => response);
      await waitFor('the first batch to start', () => model.batches.length === 1);
      const fromPost = request(url)
        .post('/length')
        .send({ text: 'abcd' })
        .then((response) => response);
      const fromGet = request(url)
        .get('/length/abcdefg')
        .then((response) => response);
      await waitFor('2 queued requests', () => batcher.queueLength === 2);
      model.release(true);
      const [w, p, g] = await Promise.all([warmup, fromPost, fromGet]);

      expect(model.sizes).toEqual([1, 2]);
      expect([w.body, p.body, g.body]).toEqual([1, 4, 7]);
      expect(p.headers['x-batch-id']).toBe('2');
      expect(g.headers['x-batch-id']).toBe('2');
      expect(p.headers['x-batch-size']).toBe('2');
    });

    it('gives each route its own batcher when each has its own handler', async () => {
      const double = new GatedHandler((n: number) => n * 2);
      const square = new GatedHandler((n: number) => n * n);
      double.release(true);
      square.release(true);
      const doubleRoute = driver.route({ input: parseNumber, handler: double.handler, name: 'double' });
      const squareRoute = driver.route({ input: parseNumber, handler: square.handler, name: 'square' });
      const { url } = await driver.serve({
        routes: [
          { method: 'post', path: '/double', route: doubleRoute },
          { method: 'post', path: '/square', route: squareRoute },
        ],
      });

      const [a, b] = await Promise.all([
        request(url).post('/double').send({ number: 5 }),
        request(url).post('/square').send({ number: 5 }),
      ]);

      expect([a.status, a.body, b.status, b.body]).toEqual([200, 10, 200, 25]);
      expect([double.inputs, square.inputs]).toEqual([[5], [5]]);
      expect(doubleRoute.batcher).not.toBe(squareRoute.batcher);
      expect([doubleRoute.batcher.name, squareRoute.batcher.name]).toEqual(['double', 'square']);
    });

    it('works with app.use and, without `input` and `output`, batches the parsed body and answers JSON', async () => {
      const model = new GatedHandler((body: unknown) => `echo ${JSON.stringify(body)}`);
      model.release(true);
      const { url } = await driver.serve({
        routes: [{ method: 'use', route: driver.route({ handler: model.handler }) }],
      });

      const response = await request(url).put('/anything').send({ a: 1 });

      expect(response.status).toBe(200);
      expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
      // A string result is still JSON: a quoted string, not text/plain.
      expect(response.text).toBe(JSON.stringify('echo {"a":1}'));
      expect(model.inputs).toEqual([{ a: 1 }]);
    });

    it('sends the result through `output` when given', async () => {
      const model = new GatedHandler((n: number) => ({ sum: n + 1 }));
      model.release(true);
      const route = driver.route({
        input: parseNumber,
        handler: model.handler,
        output: (result, req, reply) => reply.text(201, `${req.body.number}+1=${result.sum}`),
      });
      const { url } = await driver.serve({ routes: [{ method: 'post', path: '/adder', route }] });

      const response = await request(url).post('/adder').send({ number: 41 });

      expect(response.status).toBe(201);
      expect(response.text).toBe('41+1=42');
      expect(response.headers['x-batch-size']).toBe('1');
    });

    it('applies per-request `callOptions`: a higher priority runs first within the next batch', async () => {
      const model = new GatedHandler((n: number) => n);
      const route = driver.route({
        input: parseNumber,
        handler: model.handler,
        callOptions: (req) => ({ priority: Number(req.query('priority') ?? 0) }),
        maxBatchSize: 2,
      });
      const { url } = await driver.serve({ routes: [{ method: 'post', path: '/echo', route }], errorHandler: {} });

      const busy = request(url)
        .post('/echo')
        .send({ number: 0 })
        .then((response) => response);
      await waitFor('the first batch to start', () => model.batches.length === 1);
      const low = request(url)
        .post('/echo')
        .send({ number: 1 })
        .then((response) => response);
      await waitFor('1 queued request', () => route.batcher.queueLength === 1);
      const high = request(url)
        .post('/echo?priority=5')
        .send({ number: 2 })
        .then((response) => response);
      await waitFor('2 queued requests', () => route.batcher.queueLength === 2);
      const urgent = request(url)
        .post('/echo?priority=9')
        .send({ number: 3 })
        .then((response) => response);
      await waitFor('3 queued requests', () => route.batcher.queueLength === 3);
      model.release(true);
      await Promise.all([busy, low, high, urgent]);

      expect(model.batches).toEqual([[0], [3, 2], [1]]);
    });
  },
);
