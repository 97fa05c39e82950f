import { describe, expect, it } from 'vitest';
import { BatchError, exposeError } from '../src/index.js';
import {
  HttpErrorCode,
  SSE_DONE,
  batchHeaders,
  httpStatusFor,
  sseError,
  sseEvent,
  toBatchError,
  toHttpError,
  unmatchedRoute,
} from '../src/http/index.js';

describe('httpStatusFor', () => {
  it('maps every code to its status', () => {
    expect(Object.fromEntries(Object.values(HttpErrorCode).map((code) => [code, httpStatusFor(code)]))).toEqual({
      INVALID_INPUT: 400,
      NOT_FOUND: 404,
      METHOD_NOT_ALLOWED: 405,
      UNSUPPORTED_MEDIA_TYPE: 415,
      UNAUTHORIZED: 401,
      ITEM_TOO_LARGE: 413,
      QUEUE_FULL: 503,
      OVERLOADED: 503,
      DEADLINE_EXCEEDED: 504,
      EXECUTION_TIMEOUT: 504,
      BAD_HANDLER_RESULT: 500,
      HANDLER_ERROR: 500,
      CLOSED: 503,
      UNAVAILABLE: 503,
    });
  });
});

describe('toHttpError', () => {
  it('sends 401 with WWW-Authenticate: Bearer for UNAUTHORIZED', () => {
    expect(toHttpError(new BatchError('UNAUTHORIZED', 'Incorrect API key'))).toEqual({
      status: 401,
      headers: { 'WWW-Authenticate': 'Bearer' },
      body: { error: { code: 'UNAUTHORIZED', message: 'Incorrect API key' } },
    });
  });

  it('sends 503 with Retry-After for QUEUE_FULL', () => {
    const error = new BatchError('QUEUE_FULL', 'queue is full', { retryAfterSeconds: 2.5 });
    expect(toHttpError(error)).toEqual({
      status: 503,
      headers: { 'Retry-After': '3' },
      body: {
        error: {
          code: 'QUEUE_FULL',
          message: 'The server is at capacity: its queue is full; retry later',
          retryAfterSeconds: 3,
        },
      },
    });
    // The engine's own message and figures only with `exposeDetails`.
    const detailed = new BatchError('OVERLOADED', 'Batcher "x" is overloaded', { details: { predictedMs: 900 } });
    expect(toHttpError(detailed, { exposeDetails: true }).body).toEqual({
      error: {
        code: 'OVERLOADED',
        message: 'Batcher "x" is overloaded',
        details: { predictedMs: 900 },
        retryAfterSeconds: 1,
      },
    });
    expect(JSON.stringify(toHttpError(detailed).body)).not.toMatch(/predictedMs|Batcher/);
  });

  it('answers a known path with another method 405 and its Allow header, an unknown one 404', () => {
    const routes = { '/v1/completions': ['POST'], '/': ['GET', 'HEAD'] };
    expect(toHttpError(unmatchedRoute('PUT', '/v1/completions', routes))).toEqual({
      status: 405,
      headers: { Allow: 'POST' },
      body: {
        error: {
          code: 'METHOD_NOT_ALLOWED',
          message: 'PUT is not allowed on /v1/completions; allowed: POST',
          details: { allowed: ['POST'] },
        },
      },
    });
    expect(toHttpError(unmatchedRoute('OPTIONS', '/', routes)).headers).toEqual({ Allow: 'GET, HEAD' });
    expect(toHttpError(unmatchedRoute('GET', '/nope', routes))).toEqual({
      status: 404,
      headers: {},
      body: { error: { code: 'NOT_FOUND', message: 'No route for GET /nope' } },
    });
    // `toString` is a property of every object, not a route.
    expect(toHttpError(unmatchedRoute('GET', 'toString', routes)).status).toBe(404);
  });

  it('shows validation details but never an unexposed handler message or a stack', () => {
    const invalid = new BatchError('INVALID_INPUT', '`prompt` must be a string', { details: { field: 'prompt' } });
    expect(toHttpError(invalid)).toEqual({
      status: 400,
      headers: {},
      body: { error: { code: 'INVALID_INPUT', message: '`prompt` must be a string', details: { field: 'prompt' } } },
    });
    const secret = toHttpError(new Error('password=hunter2 at /srv/model.ts:12'));
    expect(secret).toEqual({
      status: 500,
      headers: {},
      body: { error: { code: 'HANDLER_ERROR', message: 'Internal Server Error' } },
    });
    expect(JSON.stringify(secret)).not.toContain('hunter2');
    expect(toHttpError(exposeError(new Error('model says no'))).body).toEqual({
      error: { code: 'HANDLER_ERROR', message: 'model says no' },
    });
    expect(toHttpError('a string was thrown').status).toBe(500);
    const hidden = new BatchError('UNAVAILABLE', 'cannot read /srv/models/x/onnx/model.onnx', { expose: false });
    expect(toHttpError(hidden)).toEqual({
      status: 503,
      headers: { 'Retry-After': '1' },
      body: {
        error: {
          code: 'UNAVAILABLE',
          message: 'The model is not available right now; retry later',
          retryAfterSeconds: 1,
        },
      },
    });
  });

  it('maps body-parser style errors by their status', () => {
    const parse = Object.assign(new SyntaxError('Unexpected token } in JSON at position 9'), {
      status: 400,
      expose: true,
    });
    expect(toHttpError(parse)).toEqual({
      status: 400,
      headers: {},
      body: { error: { code: 'INVALID_INPUT', message: 'Unexpected token } in JSON at position 9' } },
    });
    const large = Object.assign(new Error('request entity too large'), { statusCode: 413, expose: true });
    expect(toHttpError(large).body.error).toEqual({ code: 'ITEM_TOO_LARGE', message: 'request entity too large' });
    const media = Object.assign(new Error('unsupported'), { status: 415, expose: false });
    expect(toHttpError(media)).toMatchObject({ status: 415, body: { error: { message: 'Bad request (HTTP 415)' } } });
    expect(toBatchError(Object.assign(new Error('boom'), { status: 502 })).code).toBe('HANDLER_ERROR');
    expect(toHttpError(Object.assign(new Error('Not Found'), { status: 404, expose: true }))).toMatchObject({
      status: 404,
      body: { error: { code: 'NOT_FOUND', message: 'Not Found' } },
    });
  });
});

describe('headers and SSE framing', () => {
  it('renders the batch headers', () => {
    expect(batchHeaders({ batchId: 7, batchSize: 4, queueTimeMs: 3.14159, key: undefined })).toEqual({
      'X-Batch-Size': '4',
      'X-Batch-Id': '7',
      'X-Queue-Time-Ms': '3.14',
    });
  });

  it('frames values as JSON events and errors as named events', () => {
    expect(sseEvent('line one\nline two')).toBe('data: "line one\\nline two"\n\n');
    expect(sseEvent({ token: 'a' }, 'token')).toBe('event: token\ndata: {"token":"a"}\n\n');
    expect(SSE_DONE).toBe('data: [DONE]\n\n');
    expect(sseError(new BatchError('DEADLINE_EXCEEDED', 'too slow'))).toBe(
      'event: error\ndata: {"error":{"code":"DEADLINE_EXCEEDED","message":"too slow"}}\n\n',
    );
  });
});

describe('describeValue', () => {
  it('never throws or runs long on values from request bodies', async () => {
    const { describeValue } = await import('../src/index.js');
    let deep: unknown[] = [];
    for (let i = 0; i < 20_000; i += 1) deep = [deep];
    expect(describeValue({ toString: 1 })).toBe('`[object]` (object)');
    expect(describeValue(deep)).toBe('`[array of 1]` (array)');
    expect(describeValue('x'.repeat(500))).toBe(`\`"${'x'.repeat(196)}...\` (string)`);
    expect(describeValue(Array.from({ length: 300 }, () => 1))).toBe('`[array of 300]` (array)');
    expect(describeValue([1, 2])).toBe('`[1,2]` (array)');
    expect(describeValue(0)).toBe('`0` (number)');
  });
});

describe('the transport seam', () => {
  /** A batcher implemented elsewhere (a Redis queue, a second copy of core): only the interface and the brand. */
  function remoteBatcher() {
    const call = async (input: number) => input * 2;
    return Object.assign(call, {
      [Symbol.for('microbatch.batcher')]: true as const,
      call,
      streaming: false as const,
    });
  }

  it('accepts any branded object implementing Batcher, and refuses an unbranded look-alike', async () => {
    const { BATCHER_BRAND, isBatcher, createBatcher } = await import('../src/index.js');
    const { batcherForRoute } = await import('../src/http/index.js');
    const remote = remoteBatcher();
    expect(isBatcher(remote)).toBe(true);
    expect(isBatcher(createBatcher(async (xs: number[]) => xs))).toBe(true);
    expect(BATCHER_BRAND).toBe(Symbol.for('microbatch.batcher'));
    expect(batcherForRoute('batchRoute', { batcher: remote as never })).toBe(remote);
    const lookAlike = Object.assign(async (x: number) => x, { call: async (x: number) => x, streaming: false });
    expect(isBatcher(lookAlike)).toBe(false);
    expect(() => batcherForRoute('batchRoute', { batcher: lookAlike as never })).toThrow(
      'Expected `batcher` to be a batcher from `createBatcher()`, got `function` (function)',
    );
  });
});

describe('writeJson', () => {
  it('writes the status, the extra headers and the body as JSON', async () => {
    const { writeJson } = await import('../src/http/index.js');
    const written: { status?: number; headers: Record<string, string>; body?: string } = { headers: {} };
    const res = {
      set statusCode(status: number) {
        written.status = status;
      },
      setHeader: (name: string, value: string) => {
        written.headers[name] = value;
      },
      end: (body: string) => {
        written.body = body;
      },
    };
    writeJson(res as never, 201, { ok: true }, { 'Cache-Control': 'no-store' });
    expect(written).toEqual({
      status: 201,
      headers: { 'Cache-Control': 'no-store', 'Content-Type': 'application/json; charset=utf-8' },
      body: '{"ok":true}',
    });
    writeJson(res as never, 200, undefined);
    expect(written.body).toBe('null');
  });
});
