// The JSON body reader of the Hono adapter, on Web APIs only (Request, ReadableStream, DecompressionStream,
// TextDecoder), with the same checks and fixed messages as core's Node reader used by the other adapters.
import type { Context, MiddlewareHandler } from 'hono';
import { BatchError } from '@microbatch/core';
import { errorResponse } from './error-response.js';

/** The body limit of every microbatch JSON route, in bytes, before and after decompression: 64 KiB (core's). */
export const JSON_BODY_LIMIT = 64 * 1024;

/** Options of {@link jsonBody} and {@link readJsonBody}. */
export interface JsonBodyOptions {
  /**
   * The largest body accepted, in bytes, as sent and once decompressed.
   * @default JSON_BODY_LIMIT (64 KiB)
   */
  readonly limit?: number;
}

declare module 'hono' {
  interface ContextVariableMap {
    /** The request's JSON body, once {@link jsonBody} read it. */
    jsonBody?: unknown;
  }
}

type DecompressionFormat = ConstructorParameters<typeof DecompressionStream>[0];

const UTF8 = new Set(['utf-8', 'utf8']);

/** `Content-Encoding` → `DecompressionStream` format (`null`: nothing to decode). */
const FORMATS: Readonly<Record<string, string | null>> = {
  identity: null,
  gzip: 'gzip',
  'x-gzip': 'gzip',
  deflate: 'deflate',
  br: 'brotli',
};

const supported = new Map<string, boolean>();

/** Whether this runtime's `DecompressionStream` decodes `format` (brotli is missing from Node 20's, for one). */
function decodes(format: string): boolean {
  let known = supported.get(format);
  if (known === undefined) {
    try {
      new DecompressionStream(format as DecompressionFormat);
      known = true;
    } catch {
      known = false;
    }
    supported.set(format, known);
  }
  return known;
}

/**
 * Reads a request's JSON body with Web APIs, checking first what the headers announce: a JSON media type
 * (`application/json` or `application/*+json`, else 415), UTF-8 (else 415), a `Content-Encoding` this runtime
 * decodes (gzip, deflate, and br where `DecompressionStream` has brotli; else 415) and a `Content-Length` within
 * `limit` (else 413 at once). While reading it stops at `limit` bytes, as sent and decompressed (413); bytes that do
 * not match their encoding are a 400, and so is text that is not JSON. An empty body reads as `{}`. Errors are
 * `BatchError`s with fixed messages that never quote the body.
 *
 * @example
 * ```ts
 * const body = await readJsonBody(c.req.raw, { limit: 16 * 1024 });
 * ```
 */
export async function readJsonBody(request: Request, options: JsonBodyOptions = {}): Promise<unknown> {
  const limit = options.limit ?? JSON_BODY_LIMIT;
  const { mediaType, charset } = parseContentType(request.headers.get('content-type'));
  if (mediaType !== 'application/json' && !/^application\/[^/]+\+json$/.test(mediaType)) {
    throw new BatchError('UNSUPPORTED_MEDIA_TYPE', 'Expected a JSON body with Content-Type: application/json');
  }
  if (charset !== undefined && !UTF8.has(charset)) {
    throw new BatchError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported charset: send the JSON body as UTF-8');
  }
  const encoding = (request.headers.get('content-encoding') ?? 'identity').trim().toLowerCase() || 'identity';
  const format = Object.hasOwn(FORMATS, encoding) ? FORMATS[encoding] : undefined;
  if (format === undefined || (format !== null && !decodes(format))) {
    throw new BatchError(
      'UNSUPPORTED_MEDIA_TYPE',
      decodes('brotli')
        ? 'Unsupported Content-Encoding: use gzip, deflate, br or identity'
        : 'Unsupported Content-Encoding: use gzip, deflate or identity',
    );
  }
  const announced = Number(request.headers.get('content-length') ?? Number.NaN);
  if (Number.isFinite(announced) && announced > limit) throw tooLarge(limit);
  if (request.body === null) return {};
  const text = await readText(request.body, limit, format);
  if (text.length === 0) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new BatchError('INVALID_INPUT', 'The request body is not valid JSON');
  }
}

/**
 * Hono middleware that reads the JSON body with {@link readJsonBody} into `c.var.jsonBody` (where `batchRoute`'s
 * default `input` finds it) and answers a failure itself as `{"error":{"code","message"}}`. A request without a
 * body (no `Content-Length` nor `Transfer-Encoding`) passes untouched.
 *
 * @example
 * ```ts
 * app.post('/generate', jsonBody({ limit: 16 * 1024 }), batchRoute({ input: (c) => c.var.jsonBody, handler }));
 * ```
 */
export function jsonBody(options: JsonBodyOptions = {}): MiddlewareHandler {
  return async function jsonBodyMiddleware(c: Context, next): Promise<Response | void> {
    if (hasBody(c.req.raw) && c.get('jsonBody') === undefined) {
      try {
        c.set('jsonBody', await readJsonBody(c.req.raw, options));
      } catch (error) {
        return errorResponse(c, error);
      }
    }
    await next();
  };
}

/** Whether a request carries a body (RFC 9112: `Transfer-Encoding`, or a `Content-Length`). */
export function hasBody(request: Request): boolean {
  return request.headers.has('transfer-encoding') || request.headers.has('content-length');
}

function parseContentType(header: string | null): { mediaType: string; charset: string | undefined } {
  const [type = '', ...params] = (header ?? '').split(';');
  let charset: string | undefined;
  for (const param of params) {
    const [name, value] = param.split('=', 2).map((part) => part.trim().toLowerCase());
    if (name === 'charset') charset = (value ?? '').replace(/^"(.*)"$/, '$1');
  }
  return { mediaType: type.trim().toLowerCase(), charset };
}

function tooLarge(limit: number): BatchError {
  return new BatchError('ITEM_TOO_LARGE', `The request body is larger than the limit of ${limit} bytes`, {
    details: { limit },
  });
}

/** The body's bytes as sent, stopped past `limit` with the 413; `failed()` tells a failure of the body itself. */
function capped(
  body: ReadableStream<Uint8Array>,
  limit: number,
): { stream: ReadableStream<Uint8Array>; failed(): boolean } {
  const source = body.getReader();
  let received = 0;
  let sourceFailed = false;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let step: Awaited<ReturnType<typeof source.read>>;
      try {
        step = await source.read();
      } catch (error) {
        sourceFailed = true;
        throw error;
      }
      if (step.done) {
        controller.close();
        return;
      }
      received += step.value.byteLength;
      if (received > limit) {
        controller.error(tooLarge(limit));
        source.cancel().catch(() => undefined);
      } else controller.enqueue(step.value);
    },
    cancel(reason) {
      return source.cancel(reason);
    },
  });
  return { stream, failed: () => sourceFailed };
}

async function readText(body: ReadableStream<Uint8Array>, limit: number, format: string | null): Promise<string> {
  const sent = capped(body, limit);
  const stream =
    format === null ? sent.stream : sent.stream.pipeThrough(new DecompressionStream(format as DecompressionFormat));
  const reader = stream.getReader();
  const decoder = new TextDecoder('utf-8');
  let text = '';
  let decoded = 0;
  try {
    for (;;) {
      let step: Awaited<ReturnType<typeof reader.read>>;
      try {
        step = await reader.read();
      } catch (error) {
        if (error instanceof BatchError) throw error;
        // The body stream fails when the client leaves; the decoder, on bytes that are not its format.
        throw sent.failed() || format === null
          ? new BatchError('INVALID_INPUT', 'The request body was cut short')
          : new BatchError('INVALID_INPUT', 'The request body does not match its Content-Encoding');
      }
      if (step.done) break;
      decoded += step.value.byteLength;
      if (decoded > limit) throw tooLarge(limit);
      text += decoder.decode(step.value, { stream: true });
    }
    return text + decoder.decode();
  } finally {
    // Stop reading: what is left is not wanted (and may be endless).
    reader.cancel().catch(() => undefined);
  }
}
