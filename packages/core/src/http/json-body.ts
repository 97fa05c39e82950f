// One JSON body reader for every adapter and app (Express, Koa, Nest on Express): the same limit, the same checks
// and the same answers everywhere, with fixed messages. A body parser's own message (which may quote the client's
// bytes, or name a library) never reaches the client.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Transform } from 'node:stream';
import { BatchError, isBatchError } from '../errors.js';

/** The body limit of every microbatch JSON route, in bytes, before and after decompression: 64 KiB. */
export const JSON_BODY_LIMIT = 64 * 1024;

/** Options of {@link readJsonBody}. */
export interface JsonBodyOptions {
  /**
   * The largest body accepted, in bytes, as sent and once decompressed.
   * @default JSON_BODY_LIMIT (64 KiB)
   */
  readonly limit?: number;
}

const ENCODINGS: Readonly<Record<string, (() => Transform) | null>> = {
  identity: null,
  gzip: () => createGunzip(),
  'x-gzip': () => createGunzip(),
  deflate: () => createInflate(),
  br: () => createBrotliDecompress(),
};

const UTF8 = new Set(['utf-8', 'utf8']);

/**
 * Reads a request's JSON body, checking before a byte is read what the headers announce: a JSON media type
 * (`application/json` or `application/*+json`, else 415: a form post needs no CORS preflight, so a JSON route must
 * not take one), UTF-8 (else 415), a known `Content-Encoding` (else 415) and a `Content-Length` within `limit`
 * (else 413 at once). While reading it stops at `limit` bytes, as sent and decompressed (413); bytes that do not
 * match their encoding are a 400, and so is text that is not JSON. An empty body reads as `{}`. Errors are
 * `BatchError`s with fixed messages. After a 413 Node discards what is left of the body while the client reads the
 * answer (closing at once would reset the connection under a client still sending, losing the answer); the server's
 * `requestTimeout` bounds that.
 *
 * @example
 * ```ts
 * const body = await readJsonBody(req, { limit: 16 * 1024 }); // throws BatchError('ITEM_TOO_LARGE', ...) beyond
 * ```
 */
export async function readJsonBody(req: IncomingMessage, options: JsonBodyOptions = {}): Promise<unknown> {
  const limit = options.limit ?? JSON_BODY_LIMIT;
  const { mediaType, charset } = parseContentType(req.headers['content-type']);
  if (mediaType !== 'application/json' && !/^application\/[^/]+\+json$/.test(mediaType)) {
    throw new BatchError('UNSUPPORTED_MEDIA_TYPE', 'Expected a JSON body with Content-Type: application/json');
  }
  if (charset !== undefined && !UTF8.has(charset)) {
    throw new BatchError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported charset: send the JSON body as UTF-8');
  }
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase() || 'identity';
  const decoder = ENCODINGS[encoding];
  if (decoder === undefined) {
    throw new BatchError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported Content-Encoding: use gzip, deflate, br or identity');
  }
  const announced = Number(req.headers['content-length']);
  if (Number.isFinite(announced) && announced > limit) throw tooLarge(limit);
  const text = await readText(req, limit, decoder?.());
  if (text.length === 0) return {};
  try {
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    throw new BatchError('INVALID_INPUT', 'The request body is not valid JSON');
  }
}

function parseContentType(header: string | undefined): { mediaType: string; charset: string | undefined } {
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

function readText(req: IncomingMessage, limit: number, decoder: Transform | undefined): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let decoded = 0;
    let settled = false;
    const finish = (error: BatchError | undefined): void => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAborted);
      req.off('aborted', onAborted);
      if (decoder !== undefined) {
        decoder.off('data', onDecoded);
        decoder.off('end', onDecodedEnd);
        decoder.off('error', onDecodeError);
        decoder.destroy();
      }
      if (error === undefined) resolve(Buffer.concat(chunks).toString('utf8'));
      else {
        // Stop reading: what is left is not wanted (and may be endless).
        req.pause();
        reject(error);
      }
    };
    const onDecoded = (chunk: Buffer): void => {
      decoded += chunk.length;
      if (decoded > limit) finish(tooLarge(limit));
      else chunks.push(chunk);
    };
    const onDecodedEnd = (): void => finish(undefined);
    const onDecodeError = (): void => {
      finish(new BatchError('INVALID_INPUT', 'The request body does not match its Content-Encoding'));
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limit) {
        finish(tooLarge(limit));
        return;
      }
      if (decoder === undefined) chunks.push(chunk);
      else decoder.write(chunk);
    };
    const onEnd = (): void => {
      if (decoder === undefined) finish(undefined);
      else decoder.end();
    };
    const onAborted = (): void => finish(new BatchError('INVALID_INPUT', 'The request body was cut short'));
    if (decoder !== undefined) {
      decoder.on('data', onDecoded);
      decoder.on('end', onDecodedEnd);
      decoder.on('error', onDecodeError);
    }
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onAborted);
    req.on('aborted', onAborted);
  });
}

/** A Node-style middleware (Express, and Nest on Express, take it as it is) that sets `req.body` or answers the error. */
export type JsonBodyMiddleware = (
  req: IncomingMessage & { body?: unknown },
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void;

/**
 * Middleware that reads the JSON body with {@link readJsonBody} into `req.body` and passes any failure to `next`
 * (Express's error handlers, such as `batchErrorHandler`, answer it). A request without a body (GET, HEAD, no
 * `Content-Length` nor `Transfer-Encoding`) passes untouched.
 *
 * @example
 * ```ts
 * app.post('/v1/completions', jsonBodyMiddleware(), handler);
 * app.use(batchErrorHandler());
 * ```
 */
export function jsonBodyMiddleware(options: JsonBodyOptions = {}): JsonBodyMiddleware {
  return (req, res, next) => {
    if (!hasBody(req) || req.body !== undefined) {
      next();
      return;
    }
    // `next` runs on the next tick, outside the promise: what it throws is the framework's to handle, never a
    // rejection of this chain.
    readJsonBody(req, options).then(
      (body) => {
        req.body = body;
        process.nextTick(next);
      },
      (error: unknown) => {
        lingerAfterRefusal(res, error);
        process.nextTick(next, error);
      },
    );
  };
}

/** Whether a request carries a body (RFC 9112: `Transfer-Encoding`, or a `Content-Length`). */
export function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined;
}

/**
 * After refusing a body it did not read (413), keeps the connection open while Node discards what the client is
 * still sending, bounded by the server's `requestTimeout`: closing at once, with unread bytes, resets the connection
 * and the client loses the answer (even one that asked for `Connection: close`). Call it before answering.
 *
 * @example
 * ```ts
 * readJsonBody(req).catch((error) => { lingerAfterRefusal(res, error); writeHttpError(res, error); });
 * ```
 */
export function lingerAfterRefusal(res: ServerResponse, error: unknown): void {
  if (!isBatchError(error, 'ITEM_TOO_LARGE') || res.headersSent) return;
  // Node closes after the answer when this is false (the client's `Connection: close`), before the body is drained.
  (res as { shouldKeepAlive: boolean }).shouldKeepAlive = true;
}
