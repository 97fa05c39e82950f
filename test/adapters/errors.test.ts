import { createBatcher, createStreamingBatcher, exposeError } from '@microbatch/core';
import { waitFor } from '@microbatch/test-kit';
import { gzipSync } from 'node:zlib';
import request from 'supertest';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { GatedHandler, jsonParseMessage } from '../helpers/adapter-http.js';
import { unsupportedEncodingMessage } from './encodings.js';
import { DRIVERS, type Driver, type NeutralRequest, type NeutralRouteOptions, closeServers } from './drivers.js';

afterEach(closeServers);

const EACH = DRIVERS.map((driver) => [driver.name, driver] as const);

function parseNumber(req: NeutralRequest): number {
  if (!req.is('application/json')) req.reject(415, 'Expected an application/json body');
  const value = (req.body as { number?: unknown }).number;
  if (value === undefined) throw new Error('`number` is required');
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new Error('`number` must be an integer');
  return value;
}

const error = (code: string, message: string) => ({ error: { code, message } });

/** An adder app with body limits and the error handler, as a user would write it; `reported` collects `onError`. */
async function adderApp(
  driver: Driver,
  model: GatedHandler<number, number>,
  options: NeutralRouteOptions<number, number> = {},
  parser: 'jsonBody' | 'library' = 'jsonBody',
) {
  const reported: unknown[] = [];
  const onError = (problem: unknown) => reported.push(problem);
  const route = driver.route<number, number>({ input: parseNumber, handler: model.handler, onError, ...options });
  const { url, appErrors } = await driver.serve({
    routes: [{ method: 'post', path: '/adder', route, json: { limit: 64, parser } }],
    errorHandler: { onError },
  });
  return { route, url, reported, appErrors };
}

describe.each(EACH)('batchRoute (%s): errors', (_name, driver) => {
  it.each(
    ['jsonBody', 'library'].filter((parser) => driver.parsers.includes(parser as 'jsonBody')) as Array<
      'jsonBody' | 'library'
    >,
  )(
    'answers request problems with exact 4xx JSON errors and fixed messages, and keeps serving (%s body parser)',
    async (parser) => {
      const model = new GatedHandler((n: number) => n + 1);
      model.release(true);
      const { url, reported, appErrors } = await adderApp(driver, model, {}, parser);
      const post = () => request(url).post('/adder');

      // Never the parser's own message, which quotes the client's bytes.
      const malformed = await post().set('Content-Type', 'application/json').send('{"number": 1,}');
      expect([malformed.status, malformed.body]).toEqual([
        400,
        error('INVALID_INPUT', 'The request body is not valid JSON'),
      ]);
      expect(malformed.text).not.toContain(jsonParseMessage('{"number": 1,}'));

      const missing = await post().send({});
      expect([missing.status, missing.body]).toEqual([400, error('INVALID_INPUT', '`number` is required')]);

      const mistyped = await post().send({ number: 'seven' });
      expect([mistyped.status, mistyped.body]).toEqual([400, error('INVALID_INPUT', '`number` must be an integer')]);

      const wrongType = await post().set('Content-Type', 'text/plain').send('{"number": 1}');
      expect([wrongType.status, wrongType.body]).toEqual([
        415,
        error(
          'UNSUPPORTED_MEDIA_TYPE',
          parser === 'jsonBody'
            ? 'Expected a JSON body with Content-Type: application/json'
            : 'Expected an application/json body',
        ),
      ]);

      // @koa/bodyparser decodes latin1 (iconv-lite); body-parser and jsonBody take UTF-8 only.
      if (parser === 'jsonBody' || driver.name === 'Express') {
        const charset = await post().set('Content-Type', 'application/json; charset=latin1').send('{"number": 1}');
        expect([charset.status, charset.body]).toEqual([
          415,
          error('UNSUPPORTED_MEDIA_TYPE', 'Unsupported charset: send the JSON body as UTF-8'),
        ]);
      }

      const encoding = await post()
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', 'compress')
        .send('{"number": 1}');
      expect([encoding.status, encoding.body]).toEqual([
        415,
        error('UNSUPPORTED_MEDIA_TYPE', unsupportedEncodingMessage(driver.name)),
      ]);

      // Koa answered 500 HANDLER_ERROR (and logged a stack) for bytes that are not what Content-Encoding says.
      const notGzip = await post()
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', 'gzip')
        .send('{"number": 1}');
      expect([notGzip.status, notGzip.body]).toEqual([
        400,
        error('INVALID_INPUT', 'The request body does not match its Content-Encoding'),
      ]);

      const gzipped = await fetch(`${url}/adder`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
        body: gzipSync('{"number": 5}'),
      });
      expect([gzipped.status, await gzipped.json()]).toEqual([200, 6]);

      const oversize = await post().send({ number: 1, padding: 'x'.repeat(100) });
      expect([oversize.status, oversize.body]).toEqual([
        413,
        {
          error: {
            code: 'ITEM_TOO_LARGE',
            message: 'The request body is larger than the limit of 64 bytes',
            details: { limit: 64 },
          },
        },
      ]);

      const fine = await post().send({ number: 1 });
      expect([fine.status, fine.body]).toEqual([200, 2]);
      expect(model.inputs).toEqual([5, 1]);
      expect(reported).toEqual([]);
      expect(appErrors).toEqual([]);
    },
  );

  it('answers QUEUE_FULL with 503 and Retry-After', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    const { route, url, reported } = await adderApp(driver, model, {
      name: 'adder',
      maxQueueSize: 1,
      retryAfterSeconds: 7,
    });

    const busy = request(url)
      .post('/adder')
      .send({ number: 1 })
      .then((response) => response);
    await waitFor('the first batch to start', () => model.batches.length === 1);
    const queued = request(url)
      .post('/adder')
      .send({ number: 2 })
      .then((response) => response);
    await waitFor('1 queued request', () => route.batcher.queueLength === 1);
    const refused = await request(url).post('/adder').send({ number: 3 });
    model.release(true);

    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('7');
    expect(refused.body).toEqual({
      error: {
        code: 'QUEUE_FULL',
        message: 'The server is at capacity: its queue is full; retry later',
        retryAfterSeconds: 7,
      },
    });
    expect((await busy).body).toBe(2);
    expect((await queued).body).toBe(3);
    expect(model.inputs).toEqual([1, 2]);
    // Load shedding is an expected answer, not a server fault.
    expect(reported).toEqual([]);
  });

  it('answers DEADLINE_EXCEEDED with 504 when a per-request deadline passes in the queue', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    const { url, reported } = await adderApp(driver, model, {
      callOptions: (req) => ({
        timeoutMs: req.query('deadline') === undefined ? undefined : Number(req.query('deadline')),
      }),
    });

    const busy = request(url)
      .post('/adder')
      .send({ number: 1 })
      .then((response) => response);
    await waitFor('the first batch to start', () => model.batches.length === 1);
    const late = await request(url).post('/adder?deadline=20').send({ number: 2 });
    model.release(true);

    expect([late.status, late.body]).toEqual([
      504,
      error('DEADLINE_EXCEEDED', 'Deadline of 20 ms exceeded while queued'),
    ]);
    expect((await busy).status).toBe(200);
    expect(model.inputs).toEqual([1]);
    expect(reported).toEqual([]);
  });

  it('answers ITEM_TOO_LARGE with 413 and its details', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    model.release(true);
    const { url } = await adderApp(driver, model, { cost: (n) => n, maxBatchCost: 100 });

    const response = await request(url).post('/adder').send({ number: 500 });

    expect(response.status).toBe(413);
    expect(response.body).toEqual({
      error: {
        code: 'ITEM_TOO_LARGE',
        message: 'Item cost 500 exceeds maxBatchCost 100',
        details: { cost: 500, maxBatchCost: 100 },
      },
    });
    expect(model.batches).toEqual([]);
  });

  it('fails only the item whose result is an Error, with a generic 500 that leaks neither message nor stack, and reports it once', async () => {
    const secret = new Error('secret: GPU 3 fell over');
    const model = new GatedHandler((n: number) => (n === 13 ? secret : n + 1));
    const { route, url, reported, appErrors } = await adderApp(driver, model);

    const busy = request(url)
      .post('/adder')
      .send({ number: 0 })
      .then((response) => response);
    await waitFor('the first batch to start', () => model.batches.length === 1);
    const [ok, bad] = [12, 13].map((number) =>
      request(url)
        .post('/adder')
        .send({ number })
        .then((response) => response),
    );
    await waitFor('2 queued requests', () => route.batcher.queueLength === 2);
    model.release(true);
    const [okResponse, badResponse] = await Promise.all([ok, bad]);
    await busy;

    expect(model.sizes).toEqual([1, 2]);
    expect([okResponse?.status, okResponse?.body]).toEqual([200, 13]);
    expect([badResponse?.status, badResponse?.body]).toEqual([500, error('HANDLER_ERROR', 'Internal Server Error')]);
    expect(badResponse?.text).not.toMatch(/secret|GPU|at /);
    expect(reported).toEqual([secret]);
    // `onError` replaces the framework's own channel.
    expect(appErrors).toEqual([]);
  });

  it("reports a batch failure shared by several requests once, through the framework's own channel without `onError`", async () => {
    const failure = new Error('secret: CUDA out of memory');
    const handler = async (_inputs: number[]) => {
      await gate.promise;
      throw failure;
    };
    let open!: () => void;
    const gate = { promise: new Promise<void>((resolve) => (open = resolve)) };
    const consoleErrors = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const route = driver.route<number, number>({
        input: parseNumber,
        handler,
        maxBatchSize: 2,
        batchWaitTimeoutMs: 60_000,
      });
      const { url, appErrors } = await driver.serve({ routes: [{ method: 'post', path: '/adder', route }] });

      const responses = Promise.all(
        [1, 2].map((number) =>
          request(url)
            .post('/adder')
            .send({ number })
            .then((response) => response),
        ),
      );
      await waitFor('one batch of 2', () => route.batcher.inFlightBatches === 1);
      open();
      for (const response of await responses) {
        expect([response.status, response.body]).toEqual([500, error('HANDLER_ERROR', 'Internal Server Error')]);
      }

      // Express logs as its own final handler does (console.error), Koa emits the app's `error` event.
      const channel =
        driver.errorChannel === 'console' ? consoleErrors.mock.calls.map(([logged]) => logged) : appErrors;
      expect(channel).toEqual([failure]);
    } finally {
      consoleErrors.mockRestore();
    }
  });

  it('shows the message of an error marked with exposeError()', async () => {
    const model = new GatedHandler<number, number>((n: number) =>
      n === 13 ? exposeError(new Error('13 is unlucky')) : n + 1,
    );
    model.release(true);
    const { url } = await adderApp(driver, model);

    const response = await request(url).post('/adder').send({ number: 13 });

    expect([response.status, response.body]).toEqual([500, error('HANDLER_ERROR', '13 is unlucky')]);
  });

  it('answers 500 for a handler that throws and for an `output` that throws, then keeps serving', async () => {
    let explode = true;
    const handler = async (inputs: number[]) => {
      if (explode) throw new Error('CUDA out of memory at /opt/model.py:12');
      return inputs.map((n) => n + 1);
    };
    const reported: unknown[] = [];
    const onError = (problem: unknown) => reported.push(problem);
    const { url } = await driver.serve({
      routes: [
        { method: 'post', path: '/adder', route: driver.route({ input: parseNumber, handler, onError }) },
        {
          method: 'post',
          path: '/broken-output',
          route: driver.route({
            input: parseNumber,
            handler,
            onError,
            output: () => {
              throw new Error('template missing');
            },
          }),
        },
      ],
    });

    const thrown = await request(url).post('/adder').send({ number: 1 });
    explode = false;
    const broken = await request(url).post('/broken-output').send({ number: 1 });
    const fine = await request(url).post('/adder').send({ number: 1 });

    expect([thrown.status, thrown.body]).toEqual([500, error('HANDLER_ERROR', 'Internal Server Error')]);
    expect([broken.status, broken.body]).toEqual([500, error('HANDLER_ERROR', 'Internal Server Error')]);
    expect([fine.status, fine.body]).toEqual([200, 2]);
    expect(reported.map((problem) => (problem as Error).message)).toEqual([
      'CUDA out of memory at /opt/model.py:12',
      'template missing',
    ]);
  });

  it('answers CLOSED with 503 and Retry-After once the batcher is closed', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    model.release(true);
    const { route, url } = await adderApp(driver, model, { name: 'adder' });

    await route.batcher.close();
    const response = await request(url).post('/adder').send({ number: 1 });

    expect(response.status).toBe(503);
    expect(response.headers['retry-after']).toBe('1');
    expect(response.body).toEqual({
      error: {
        code: 'CLOSED',
        message: 'The server is shutting down; retry on another instance',
        retryAfterSeconds: 1,
      },
    });
  });

  it('answers EXECUTION_TIMEOUT with 504', async () => {
    const model = new GatedHandler((n: number) => n + 1);
    const { url } = await adderApp(driver, model, { executionTimeoutMs: 20 });

    const response = await request(url).post('/adder').send({ number: 1 });
    model.release(true);

    expect([response.status, response.body]).toEqual([
      504,
      error('EXECUTION_TIMEOUT', 'Batch 1 ran longer than executionTimeoutMs (20 ms)'),
    ]);
    expect(model.signals[0]?.aborted).toBe(true);
  });
});

describe.each(EACH)('batchErrorHandler (%s)', (_name, driver) => {
  it('renders any error as the JSON shape, hides unexposed messages and reports only the 500', async () => {
    const bug = new Error('password=hunter2');
    const reported: unknown[] = [];
    const { url, appErrors } = await driver.serve({
      routes: [],
      plain: [
        {
          path: '/bug',
          run: () => {
            throw bug;
          },
        },
        {
          path: '/exposed',
          run: () => {
            throw Object.assign(new Error('Nope'), { status: 403, expose: true });
          },
        },
      ],
      errorHandler: { onError: (problem) => reported.push(problem) },
    });

    const bugResponse = await request(url).get('/bug');
    const exposed = await request(url).get('/exposed');

    expect([bugResponse.status, bugResponse.body]).toEqual([500, error('HANDLER_ERROR', 'Internal Server Error')]);
    expect(bugResponse.text).not.toContain('hunter2');
    // toHttpError maps every other 4xx to INVALID_INPUT (400).
    expect([exposed.status, exposed.body]).toEqual([400, error('INVALID_INPUT', 'Nope')]);
    expect(reported).toEqual([bug]);
    expect(appErrors).toEqual([]);
  });

  it("reports to the framework's own channel without `onError`", async () => {
    const bug = new Error('password=hunter2');
    const consoleErrors = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const { url, appErrors } = await driver.serve({
        routes: [],
        plain: [
          {
            path: '/bug',
            run: () => {
              throw bug;
            },
          },
        ],
        errorHandler: {},
      });
      const response = await request(url).get('/bug');
      expect(response.status).toBe(500);
      const channel =
        driver.errorChannel === 'console' ? consoleErrors.mock.calls.map(([logged]) => logged) : appErrors;
      expect(channel).toEqual([bug]);
    } finally {
      consoleErrors.mockRestore();
    }
  });
});

describe.each(EACH)('batchRoute (%s): misuse', (_name, driver) => {
  const handler = async (inputs: number[]) => inputs;
  const batchRoute = driver.batchRoute as (options: unknown) => unknown;

  it('throws a TypeError naming batchRoute unless exactly one of `handler` and `batcher` is given', () => {
    const batcher = createBatcher(handler);
    expect(() => batchRoute({})).toThrow(
      new TypeError('`batchRoute` needs exactly one of `handler` and `batcher`, got neither'),
    );
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
    expect(() => batchRoute({ batcher: handler })).toThrow(
      new TypeError('Expected `batcher` to be a batcher from `createBatcher()`, got `function` (function)'),
    );
    expect(() => batchRoute({ handler, input: 'body' })).toThrow(
      new TypeError('Expected `input` to be a function, got `"body"` (string)'),
    );
    expect(() => batchRoute({ handler, output: 'json' })).toThrow(
      new TypeError('Expected `output` to be a function, got `"json"` (string)'),
    );
    expect(() => batchRoute({ handler, onError: 'log' })).toThrow(
      new TypeError('Expected `onError` of `batchRoute` to be a function, got `"log"` (string)'),
    );
    expect(() => batchRoute(null)).toThrow(
      new TypeError('Expected `batchRoute` options to be an object, got `null` (null)'),
    );
    expect(() => batchRoute(undefined)).toThrow(
      new TypeError('Expected `batchRoute` options to be an object, got `undefined` (undefined)'),
    );
    // Core validates its own options.
    expect(() => batchRoute({ handler, maxBatchSize: 0 })).toThrow(
      new TypeError('Expected `maxBatchSize` to be an integer >= 1, got `0` (number)'),
    );
    expect(() => batchRoute({ handler, batchWaitTimeoutMs: -1 })).toThrow(
      new TypeError('Expected `batchWaitTimeoutMs` to be a finite number >= 0, got `-1` (number)'),
    );
  });

  it('rejects `output` for a streaming batcher', () => {
    const batcher = createStreamingBatcher(async function* (inputs: number[]) {
      yield inputs;
    });
    expect(() => batchRoute({ batcher, output: () => undefined })).toThrow(
      new TypeError(
        '`batchRoute` got `output` for a streaming batcher: each streamed value is sent as one Server-Sent Event',
      ),
    );
  });
});
