// Body parsers (body-parser under express.json(), co-body under @koa/bodyparser, Nest's) fail with messages that
// quote the client's bytes or name a library. Their errors are recognised here by their documented `type` (or
// zlib's `code`) and answered with the same fixed messages as `readJsonBody`, on every framework.
import { BatchError } from '../errors.js';
import type { HttpErrorCode } from './error-mapping.js';

const FIXED: Readonly<Record<string, (error: { limit?: unknown }) => BatchError<HttpErrorCode>>> = {
  'entity.parse.failed': (cause) => new BatchError('INVALID_INPUT', 'The request body is not valid JSON', { cause }),
  'entity.too.large': (cause) =>
    typeof cause.limit === 'number'
      ? new BatchError('ITEM_TOO_LARGE', `The request body is larger than the limit of ${cause.limit} bytes`, {
          cause,
          details: { limit: cause.limit },
        })
      : new BatchError('ITEM_TOO_LARGE', 'The request body is too large', { cause }),
  'charset.unsupported': (cause) =>
    new BatchError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported charset: send the JSON body as UTF-8', { cause }),
  'encoding.unsupported': (cause) =>
    new BatchError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported Content-Encoding: use gzip, deflate, br or identity', {
      cause,
    }),
  'request.aborted': (cause) => new BatchError('INVALID_INPUT', 'The request body was cut short', { cause }),
  'request.size.invalid': (cause) =>
    new BatchError('INVALID_INPUT', 'The request body does not match its Content-Length', { cause }),
  'stream.encoding.set': (cause) => new BatchError('INVALID_INPUT', 'The request body could not be read', { cause }),
};

const ZLIB_CODES = new Set([
  'Z_DATA_ERROR',
  'Z_BUF_ERROR',
  'Z_STREAM_ERROR',
  'Z_NEED_DICT',
  'ERR_BROTLI_DECOMPRESSION_FAILED',
  'ERR_TRAILING_JUNK_AFTER_STREAM_END',
]);

/**
 * The error a body parser's failure is answered with: a `BatchError` with a fixed message for the failures body
 * parsers document (malformed JSON 400, too large 413, charset or encoding 415, cut short 400) and for bytes that do
 * not match their `Content-Encoding` (400, where Koa answered 500); `error` itself for anything else.
 *
 * @example
 * ```ts
 * fromBodyParserError(Object.assign(new SyntaxError("Unexpected token 'N'"), { type: 'entity.parse.failed', status: 400 }));
 * // BatchError INVALID_INPUT 'The request body is not valid JSON'
 * ```
 */
export function fromBodyParserError(error: unknown): unknown {
  if (typeof error !== 'object' || error === null || error instanceof BatchError) return error;
  const { type, code } = error as { type?: unknown; code?: unknown };
  const fixed = typeof type === 'string' ? FIXED[type] : undefined;
  if (fixed !== undefined) return fixed(error);
  // `inflation` (under co-body) throws a plain 415 naming the client's Content-Encoding.
  if (statusOf(error) === 415 && error instanceof Error && /content-encoding/i.test(error.message)) {
    return FIXED['encoding.unsupported']?.(error as { limit?: unknown }) ?? error;
  }
  // co-body (under @koa/bodyparser) marks a JSON.parse failure with status 400 and the body, and no `type`.
  if (error instanceof SyntaxError && statusOf(error) === 400) {
    return new BatchError('INVALID_INPUT', 'The request body is not valid JSON', { cause: error });
  }
  if (typeof code === 'string' && ZLIB_CODES.has(code)) {
    return new BatchError('INVALID_INPUT', 'The request body does not match its Content-Encoding', { cause: error });
  }
  return error;
}

function statusOf(error: object): unknown {
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown };
  return status ?? statusCode;
}
