/**
 * Every failure the batcher reports has one of these codes.
 *
 * @example
 * ```ts
 * if (error instanceof BatchError && error.code === ErrorCode.QUEUE_FULL) retryLater();
 * ```
 */
export const ErrorCode = {
  /** The input was rejected before it joined a batch (adapter validation, `batchKey`/`cost` threw). */
  INVALID_INPUT: 'INVALID_INPUT',
  /** The item (or request body) is larger than any batch may hold (`maxBatchCost`, body limit). */
  ITEM_TOO_LARGE: 'ITEM_TOO_LARGE',
  /** The queue already holds `maxQueueSize` items. */
  QUEUE_FULL: 'QUEUE_FULL',
  /**
   * Refused at once because the predicted wait (from the batcher's latency estimate) exceeds `maxLatencyMs` or the
   * item's deadline, or the item's fair share of the admissible work is used up (see `fairnessKey`).
   */
  OVERLOADED: 'OVERLOADED',
  /** The item's deadline (`timeoutMs`) passed before its batch was dispatched. */
  DEADLINE_EXCEEDED: 'DEADLINE_EXCEEDED',
  /** The item's batch ran longer than `executionTimeoutMs`. */
  EXECUTION_TIMEOUT: 'EXECUTION_TIMEOUT',
  /** The handler returned something other than one result per input. */
  BAD_HANDLER_RESULT: 'BAD_HANDLER_RESULT',
  /** The handler threw, or returned an `Error` for this item. */
  HANDLER_ERROR: 'HANDLER_ERROR',
  /** The batcher is closed (or closing) and accepts no new work. */
  CLOSED: 'CLOSED',
  /** The model or its worker is not available (still loading, crashed, failed to load). */
  UNAVAILABLE: 'UNAVAILABLE',
} as const;

/** One of the {@link ErrorCode} values. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Options accepted by the {@link BatchError} constructor. */
export interface BatchErrorOptions {
  /** The underlying error, kept for logs; never sent to HTTP clients. */
  readonly cause?: unknown;
  /**
   * Whether `message` may be shown to HTTP clients.
   * @default true for every code but `HANDLER_ERROR` and `BAD_HANDLER_RESULT`
   */
  readonly expose?: boolean;
  /** Seconds a client should wait before retrying (sent as `Retry-After` with 503). */
  readonly retryAfterSeconds?: number;
  /** Extra machine-readable facts (for example the offending `field`); sent to clients when exposed. */
  readonly details?: Readonly<Record<string, unknown>>;
}

const INTERNAL_CODES: ReadonlySet<string> = new Set([ErrorCode.HANDLER_ERROR, ErrorCode.BAD_HANDLER_RESULT]);

/**
 * Marks a `BatchError`. Registered with `Symbol.for`, so an error made by another copy of core in the same process
 * (one loaded by `import`, one by `require`) is recognised as a `BatchError` too, and keeps its HTTP status. JSON
 * cannot carry a symbol key, so a request body can never pass for one.
 */
const ERROR_BRAND: unique symbol = Symbol.for('microbatch.error');

function isBranded(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as { [ERROR_BRAND]?: unknown })[ERROR_BRAND] === true;
}

/**
 * The one error class of microbatch: a `code` from {@link ErrorCode} and a message that says what went wrong.
 * `C` widens the code for layers that add their own (`@microbatch/core/http`'s `HttpErrorCode`).
 *
 * @example
 * ```ts
 * throw new BatchError('INVALID_INPUT', '`prompt` must be a non-empty string', { details: { field: 'prompt' } });
 * ```
 */
export class BatchError<C extends string = ErrorCode> extends Error {
  override readonly name = 'BatchError';
  readonly code: C;
  readonly expose: boolean;
  readonly retryAfterSeconds: number | undefined;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  /** `error instanceof BatchError` holds for errors of any copy of core (subclasses keep the usual test). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== BatchError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return isBranded(value);
  }

  constructor(code: C, message: string, options: BatchErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.expose = options.expose ?? !INTERNAL_CODES.has(code);
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.details = options.details;
  }
}

/**
 * Whether `value` is a {@link BatchError}, optionally with the given code.
 *
 * @example
 * ```ts
 * if (isBatchError(error, 'DEADLINE_EXCEEDED')) metrics.timeouts.inc();
 * ```
 */
export function isBatchError<C extends string = ErrorCode>(value: unknown, code?: C): value is BatchError<C> {
  return isBranded(value) && (code === undefined || (value as BatchError<string>).code === code);
}

Object.defineProperty(BatchError.prototype, ERROR_BRAND, { value: true });

/**
 * Marks an error thrown by a handler or validator as safe to show to clients (like `http-errors`' `expose`).
 *
 * @example
 * ```ts
 * return inputs.map((x) => (x.length > 512 ? exposeError(new Error('prompt is longer than 512 tokens')) : run(x)));
 * ```
 */
export function exposeError<E extends Error>(error: E): E & { expose: true } {
  return Object.assign(error, { expose: true as const });
}
