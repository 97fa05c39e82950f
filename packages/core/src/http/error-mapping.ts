import { BatchError, ErrorCode, isBatchError } from '../errors.js';

/**
 * The codes an HTTP answer may carry: every engine {@link ErrorCode} plus the ones only HTTP layers raise.
 *
 * @example
 * ```ts
 * throw new BatchError(HttpErrorCode.UNSUPPORTED_MEDIA_TYPE, 'Expected an application/json body');
 * ```
 */
export const HttpErrorCode = {
  ...ErrorCode,
  /** No route answers this method and path. */
  NOT_FOUND: 'NOT_FOUND',
  /** A route answers this path, but not this method (405, with an `Allow` header from `details.allowed`). */
  METHOD_NOT_ALLOWED: 'METHOD_NOT_ALLOWED',
  /** The request body is not of a media type the route accepts. */
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  /** The request carries no valid credentials (401, with `WWW-Authenticate: Bearer`). */
  UNAUTHORIZED: 'UNAUTHORIZED',
} as const;

/** One of the {@link HttpErrorCode} values. */
export type HttpErrorCode = (typeof HttpErrorCode)[keyof typeof HttpErrorCode];

/**
 * The JSON body every adapter sends for an error: `{"error":{"code","message"}}`, with `details` on a 4xx, and
 * `retryAfterSeconds` (what `Retry-After` says) on a 503.
 */
export interface HttpErrorBody {
  readonly error: {
    readonly code: HttpErrorCode;
    readonly message: string;
    readonly details?: Readonly<Record<string, unknown>>;
    readonly retryAfterSeconds?: number;
  };
}

/**
 * Options of {@link toHttpError}.
 *
 * @example
 * ```ts
 * toHttpError(error, { exposeDetails: true }); // 503s keep the batcher's name and its figures (internal services)
 * ```
 */
export interface HttpErrorOptions {
  /**
   * Whether a 503 keeps the engine's own message and `details` (the batcher's name, `predictedMs`, `limitMs`,
   * queue sizes). Off, a 503 says only what a client can act on: `code`, a fixed message and `retryAfterSeconds`.
   * @default false
   */
  readonly exposeDetails?: boolean;
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
} as const satisfies Record<HttpErrorCode, number>;

const GENERIC_MESSAGE = 'Internal Server Error';
// What a 503 says without `exposeDetails`: the engine's messages name batchers (a Nest controller's method) and
// carry its latency figures, which are the operator's business.
const REFUSAL_MESSAGES: Readonly<Partial<Record<HttpErrorCode, string>>> = {
  QUEUE_FULL: 'The server is at capacity: its queue is full; retry later',
  OVERLOADED: 'The server is overloaded: the request would not be served in time; retry later',
  CLOSED: 'The server is shutting down; retry on another instance',
  UNAVAILABLE: 'The model is not available right now; retry later',
};
// What a client reads when the real message is not exposed (it may hold paths or a model's internals).
const GENERIC_BY_STATUS: Readonly<Record<number, string>> = {
  500: GENERIC_MESSAGE,
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/**
 * The HTTP status for an error code: the single place where codes become statuses. A code unknown to this
 * version (raised by a newer package) is a 500.
 *
 * @example
 * ```ts
 * httpStatusFor('QUEUE_FULL'); // 503
 * ```
 */
export function httpStatusFor(code: HttpErrorCode): number {
  return Object.hasOwn(STATUS_BY_CODE, code) ? STATUS_BY_CODE[code] : 500;
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
export function toBatchError(error: unknown): BatchError<HttpErrorCode> {
  if (isBatchError<HttpErrorCode>(error)) return error;
  const status = statusOf(error);
  if (status !== undefined && status >= 400 && status < 500) {
    const code =
      status === 404
        ? HttpErrorCode.NOT_FOUND
        : status === 405
          ? HttpErrorCode.METHOD_NOT_ALLOWED
          : status === 413
            ? HttpErrorCode.ITEM_TOO_LARGE
            : status === 415
              ? HttpErrorCode.UNSUPPORTED_MEDIA_TYPE
              : HttpErrorCode.INVALID_INPUT;
    const exposed = (error as { expose?: unknown }).expose !== false;
    const message = exposed && error instanceof Error ? error.message : `Bad request (HTTP ${status})`;
    return new BatchError<HttpErrorCode>(code, message, { cause: error });
  }
  const expose = typeof error === 'object' && error !== null && (error as { expose?: unknown }).expose === true;
  const message = expose && error instanceof Error ? error.message : GENERIC_MESSAGE;
  return new BatchError<HttpErrorCode>(HttpErrorCode.HANDLER_ERROR, message, { cause: error, expose });
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
export function toHttpError(error: unknown, options: HttpErrorOptions = {}): HttpErrorResponse {
  const batchError = toBatchError(error);
  const status = httpStatusFor(batchError.code);
  const headers: Record<string, string> = {};
  const allowed = status === 405 ? batchError.details?.allowed : undefined;
  if (Array.isArray(allowed)) headers.Allow = allowed.join(', ');
  // RFC 6750: a 401 names the scheme the client must use.
  if (status === 401) headers['WWW-Authenticate'] = 'Bearer';
  const message = batchError.expose ? batchError.message : (GENERIC_BY_STATUS[status] ?? GENERIC_MESSAGE);
  const details = batchError.expose ? batchError.details : undefined;
  if (status !== 503) {
    return {
      status,
      headers,
      body: {
        error: details === undefined ? { code: batchError.code, message } : { code: batchError.code, message, details },
      },
    };
  }
  const retryAfterSeconds = Math.max(1, Math.ceil(batchError.retryAfterSeconds ?? 1));
  headers['Retry-After'] = String(retryAfterSeconds);
  const code = batchError.code;
  if (options.exposeDetails === true) {
    const body =
      details === undefined ? { code, message, retryAfterSeconds } : { code, message, details, retryAfterSeconds };
    return { status, headers, body: { error: body } };
  }
  const refusal = REFUSAL_MESSAGES[code] ?? GENERIC_BY_STATUS[503] ?? GENERIC_MESSAGE;
  return { status, headers, body: { error: { code, message: refusal, retryAfterSeconds } } };
}
