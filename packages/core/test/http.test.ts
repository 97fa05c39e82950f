import { describe, expect, it } from 'vitest';
import {
  BatchError,
  ErrorCode,
  SSE_DONE,
  batchHeaders,
  exposeError,
  httpStatusFor,
  sseError,
  sseEvent,
  toBatchError,
  toHttpError,
} from '../src/index.js';

describe('httpStatusFor', () => {
  it('maps every code to its status', () => {
    expect(Object.fromEntries(Object.values(ErrorCode).map((code) => [code, httpStatusFor(code)]))).toEqual({
      INVALID_INPUT: 400,
      NOT_FOUND: 404,
      UNSUPPORTED_MEDIA_TYPE: 415,
      ITEM_TOO_LARGE: 413,
      QUEUE_FULL: 503,
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
  it('sends 503 with Retry-After for QUEUE_FULL', () => {
    const error = new BatchError('QUEUE_FULL', 'queue is full', { retryAfterSeconds: 2.5 });
    expect(toHttpError(error)).toEqual({
      status: 503,
      headers: { 'Retry-After': '3' },
      body: { error: { code: 'QUEUE_FULL', message: 'queue is full' } },
    });
  });

  it('shows validation details but never an unexposed handler message or a stack', () => {
    const invalid = new BatchError('INVALID_INPUT', '`prompt` must be a string', { details: { field: 'prompt' } });
    expect(toHttpError(invalid)).toEqual({
      status: 400,
      headers: {},
      body: { error: { code: 'INVALID_INPUT', message: '`prompt` must be a string', details: { field: 'prompt' } } },
    });
    const secret = toHttpError(new Error('password=hunter2 at /srv/model.ts:12'));
    expect(secret).toEqual({ status: 500, headers: {}, body: { error: { code: 'HANDLER_ERROR', message: 'Internal Server Error' } } });
    expect(JSON.stringify(secret)).not.toContain('hunter2');
    expect(toHttpError(exposeError(new Error('model says no'))).body).toEqual({
      error: { code: 'HANDLER_ERROR', message: 'model says no' },
    });
    expect(toHttpError('a string was thrown').status).toBe(500);
    const hidden = new BatchError('UNAVAILABLE', 'cannot read /srv/models/x/onnx/model.onnx', { expose: false });
    expect(toHttpError(hidden)).toEqual({
      status: 503,
      headers: { 'Retry-After': '1' },
      body: { error: { code: 'UNAVAILABLE', message: 'Service Unavailable' } },
    });
  });

  it('maps body-parser style errors by their status', () => {
    const parse = Object.assign(new SyntaxError('Unexpected token } in JSON at position 9'), { status: 400, expose: true });
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
    expect(describeValue(deep)).toBe('`[array of 1]` (object)');
    expect(describeValue('x'.repeat(500))).toBe(`\`"${'x'.repeat(196)}...\` (string)`);
    expect(describeValue(Array.from({ length: 300 }, () => 1))).toBe(`\`${'1,'.repeat(98)}1...\` (object)`);
    expect(describeValue(0)).toBe('`0` (number)');
  });
});
