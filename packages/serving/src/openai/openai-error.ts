// OpenAI's error shape, `{ error: { message, type, param, code } }` (what the official clients read into `APIError`),
// made from core's one error mapping (`toHttpError`: the status, `Retry-After`, the message a client may see).
import type { ServerResponse } from 'node:http';
import { type HttpErrorBody, type HttpErrorOptions, toHttpError, writeJson } from '@microbatch/core/http';

/**
 * An error answer in OpenAI's shape, microbatch's `details` kept beside its fields.
 *
 * @example
 * ```ts
 * const body: OpenAiErrorBody = {
 *   error: { message: '`n` must be ...', type: 'invalid_request_error', param: 'n', code: 'INVALID_INPUT' },
 * };
 * ```
 */
export interface OpenAiErrorBody {
  readonly error: {
    /** What went wrong, never an internal message unless `exposeDetails` asks for a refusal's own. */
    readonly message: string;
    /** `invalid_request_error` (4xx), `server_overloaded` (503, 429) or `server_error` (other 5xx). */
    readonly type: string;
    /** The request field at fault (`details.field`), else `null`. */
    readonly param: string | null;
    /** microbatch's code (`INVALID_INPUT`, `QUEUE_FULL`, ...): the same as in `toHttpError`'s answers. */
    readonly code: string;
    readonly details?: Readonly<Record<string, unknown>>;
  };
}

/** OpenAI's `error.type` for a status: the client's fault, overload, or the server's. */
function errorType(status: number): string {
  if (status === 503 || status === 429) return 'server_overloaded';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/**
 * The OpenAI shape of one of core's error answers (`toHttpError`'s body with its status).
 *
 * @example
 * ```ts
 * const { status, body } = toHttpError(error);
 * toOpenAiErrorBody(status, body).error.type; // 'invalid_request_error' for a 400
 * ```
 */
export function toOpenAiErrorBody(status: number, body: HttpErrorBody): OpenAiErrorBody {
  const { code, message, details } = body.error;
  const field = details?.field;
  return {
    error: {
      message,
      type: errorType(status),
      param: typeof field === 'string' ? field : null,
      code,
      ...(details === undefined ? {} : { details }),
    },
  };
}

/**
 * `error` as an OpenAI error answer: status and headers (`Retry-After`, `Allow`) from core's one mapping
 * (`toHttpError`, with `options`), the body in OpenAI's shape.
 *
 * @example
 * ```ts
 * toOpenAiError(new BatchError('QUEUE_FULL', 'full')).status; // 503
 * ```
 */
export function toOpenAiError(
  error: unknown,
  options: HttpErrorOptions = {},
): { readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly body: OpenAiErrorBody } {
  const { status, headers, body } = toHttpError(error, options);
  return { status, headers, body: toOpenAiErrorBody(status, body) };
}

/**
 * Writes an error in OpenAI's shape, `{ error: { message, type, param, code } }`, keeping microbatch's `details`
 * beside them. Status, `Retry-After` and the exposed message come from core's one mapping (`toHttpError`, with
 * `options`), so nothing internal reaches the client unless `exposeDetails` asks for a refusal's own message. A
 * response already started is destroyed instead.
 *
 * @example
 * ```ts
 * writeOpenAiError(res, new BatchError('INVALID_INPUT', '`n` must be ...', { details: { field: 'n' } }));
 * // 400 {"error":{"message":"`n` must be ...","type":"invalid_request_error","param":"n","code":"INVALID_INPUT",...}}
 * ```
 */
export function writeOpenAiError(res: ServerResponse, error: unknown, options: HttpErrorOptions = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, headers, body } = toOpenAiError(error, options);
  writeJson(res, status, body, headers);
}
