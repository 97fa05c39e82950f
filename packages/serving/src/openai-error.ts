import type { ServerResponse } from 'node:http';
import { type HttpErrorOptions, toHttpError, writeJson } from '@microbatch/core/http';

/** OpenAI's `error.type` for a status: the client's fault, overload, or the server's. */
function errorType(status: number): string {
  if (status === 503 || status === 429) return 'server_overloaded';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/**
 * Writes an error in OpenAI's shape, `{ error: { message, type, param, code } }` (what the official clients read
 * into `APIError`), keeping microbatch's `details` beside them. Status, `Retry-After` and the exposed message come
 * from core's one mapping (`toHttpError`, with `options`), so nothing internal reaches the client unless
 * `exposeDetails` asks for a refusal's own message. A response already started is
 * destroyed instead.
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
  const { status, headers, body } = toHttpError(error, options);
  const { code, message, details } = (body as { error: { code: string; message: string; details?: unknown } }).error;
  const field = (details as { field?: unknown } | undefined)?.field;
  writeJson(
    res,
    status,
    {
      error: {
        message,
        type: errorType(status),
        param: typeof field === 'string' ? field : null,
        code,
        ...(details === undefined ? {} : { details }),
      },
    },
    headers,
  );
}
