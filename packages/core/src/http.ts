import { BatchError, ErrorCode } from './errors.js';
import type { DispatchInfo } from './types.js';

/** The JSON body every adapter sends for an error: `{"error":{"code","message"}}`. */
export interface HttpErrorBody {
  readonly error: {
    readonly code: ErrorCode;
    readonly message: string;
    readonly details?: Readonly<Record<string, unknown>>;
  };
}

/** What an adapter writes for an error: status, extra headers and the JSON body. */
export interface HttpErrorResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: HttpErrorBody;
}

const STATUS_BY_CODE = {
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
} as const satisfies Record<ErrorCode, number>;

const GENERIC_MESSAGE = 'Internal Server Error';
// What a client reads when the real message is not exposed (it may hold paths or a model's internals).
const GENERIC_BY_STATUS: Readonly<Record<number, string>> = {
  500: GENERIC_MESSAGE,
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/**
 * The HTTP status for an error code: the single place where codes become statuses.
 *
 * @example
 * ```ts
 * httpStatusFor('QUEUE_FULL'); // 503
 * ```
 */
export function httpStatusFor(code: ErrorCode): number {
  return STATUS_BY_CODE[code];
}

/**
 * Turns anything thrown into a {@link BatchError}. Errors from body parsers and `http-errors` that carry a 4xx
 * `status` and `expose: true` keep their message; every other unknown error becomes an unexposed `HANDLER_ERROR`.
 *
 * @example
 * ```ts
 * const error = toBatchError(new SyntaxError('Unexpected token'));
 * error.code; // 'HANDLER_ERROR'
 * ```
 */
export function toBatchError(error: unknown): BatchError {
  if (error instanceof BatchError) return error;
  const status = statusOf(error);
  if (status !== undefined && status >= 400 && status < 500) {
    const code =
      status === 404
        ? ErrorCode.NOT_FOUND
        : status === 413
          ? ErrorCode.ITEM_TOO_LARGE
          : status === 415
            ? ErrorCode.UNSUPPORTED_MEDIA_TYPE
            : ErrorCode.INVALID_INPUT;
    const exposed = (error as { expose?: unknown }).expose !== false;
    const message = exposed && error instanceof Error ? error.message : `Bad request (HTTP ${status})`;
    return new BatchError(code, message, { cause: error });
  }
  const expose = typeof error === 'object' && error !== null && (error as { expose?: unknown }).expose === true;
  const message = expose && error instanceof Error ? error.message : GENERIC_MESSAGE;
  return new BatchError(ErrorCode.HANDLER_ERROR, message, { cause: error, expose });
}

function statusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown };
  const value = typeof status === 'number' ? status : statusCode;
  return typeof value === 'number' && Number.isInteger(value) ? value : undefined;
}

/**
 * What an adapter should answer for an error: status from {@link httpStatusFor}, `Retry-After` for 503, and a
 * JSON body that never carries a stack trace or an unexposed message.
 *
 * @example
 * ```ts
 * const { status, headers, body } = toHttpError(error);
 * res.status(status).set(headers).json(body);
 * ```
 */
export function toHttpError(error: unknown): HttpErrorResponse {
  const batchError = toBatchError(error);
  const status = httpStatusFor(batchError.code);
  const headers: Record<string, string> = {};
  if (status === 503) headers['Retry-After'] = String(Math.max(1, Math.ceil(batchError.retryAfterSeconds ?? 1)));
  const message = batchError.expose ? batchError.message : (GENERIC_BY_STATUS[status] ?? GENERIC_MESSAGE);
  const details = batchError.expose ? batchError.details : undefined;
  return {
    status,
    headers,
    body: { error: details === undefined ? { code: batchError.code, message } : { code: batchError.code, message, details } },
  };
}

/**
 * The response headers that show batching at work: `X-Batch-Size`, `X-Batch-Id` and `X-Queue-Time-Ms`.
 *
 * @example
 * ```ts
 * await batcher.call(input, { onDispatch: (info) => res.set(batchHeaders(info)) });
 * ```
 */
export function batchHeaders(info: DispatchInfo): Record<string, string> {
  return {
    'X-Batch-Size': String(info.batchSize),
    'X-Batch-Id': String(info.batchId),
    'X-Queue-Time-Ms': info.queueTimeMs.toFixed(2),
  };
}

/** The headers of a Server-Sent Events response. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-cache, no-transform',
  Connection: 'keep-alive',
  'X-Accel-Buffering': 'no',
};

/**
 * One Server-Sent Event carrying `value` as JSON (`data: ...\n\n`); a named event when `event` is given.
 *
 * @example
 * ```ts
 * res.write(sseEvent({ token: 'Once' })); // 'data: {"token":"Once"}\n\n'
 * ```
 */
export function sseEvent(value: unknown, event?: string): string {
  const data = `data: ${JSON.stringify(value ?? null)}\n\n`;
  return event === undefined ? data : `event: ${event}\n${data}`;
}

/** The last event of every stream. */
export const SSE_DONE = 'data: [DONE]\n\n';

/**
 * The event sent when a stream fails after its headers went out: `event: error` with the JSON error body.
 *
 * @example
 * ```ts
 * res.end(sseError(error));
 * ```
 */
export function sseError(error: unknown): string {
  return sseEvent(toHttpError(error).body, 'error');
}
