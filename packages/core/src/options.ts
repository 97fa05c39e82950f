import type { BatcherOptions, CallOptions, Clock, OnBatchError } from './types.js';

/** The options after defaults are applied and every value is checked. */
export type ResolvedOptions<I> = Required<BatcherOptions<I>>;

// `performance.now()` and the timers are looked up at call time, so fake timers installed after import still apply.
const systemClock: Clock = {
  now: () => performance.now(),
  // Not unref'd: a timer exists only while an item waits for its result, and a script awaiting that result
  // must not exit before it comes.
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as Parameters<typeof clearTimeout>[0]),
};

/** The library defaults; documented on {@link BatcherOptions}. */
export const DEFAULT_OPTIONS = {
  name: 'default',
  maxBatchSize: 8,
  batchWaitTimeoutMs: 5,
  maxConcurrentBatches: 1,
  maxQueueSize: 1024,
  timeoutMs: Number.POSITIVE_INFINITY,
  executionTimeoutMs: Number.POSITIVE_INFINITY,
  batchKey: () => undefined,
  cost: () => 1,
  maxBatchCost: Number.POSITIVE_INFINITY,
  onBatchError: 'fail-batch',
  retryAfterSeconds: 1,
  clock: systemClock,
} as const satisfies Required<BatcherOptions<unknown>>;

const ON_BATCH_ERROR: readonly OnBatchError[] = ['fail-batch', 'isolate'];

/**
 * Renders a value for a misuse message, as every microbatch `TypeError` does.
 *
 * @example
 * ```ts
 * describeValue(0); // '`0` (number)'
 * ```
 */
export function describe(value: unknown): string {
  return `\`${show(value)}\` (${value === null ? 'null' : typeof value})`;
}

/** `String(value)`, except that it never throws and never runs long: request bodies reach here too. */
function show(value: unknown): string {
  if (typeof value === 'function') return 'function';
  let shown: string;
  try {
    shown = typeof value === 'string' ? JSON.stringify(value) : String(value);
  } catch {
    // JSON such as {"toString": 1} has no callable toString/valueOf, and arrays nested thousands deep overflow
    // the stack in Array.prototype.join: both throw, and a message about a bad value must not.
    return Array.isArray(value) ? `[array of ${value.length}]` : '[object]';
  }
  return shown.length > 200 ? `${shown.slice(0, 197)}...` : shown;
}

/** Throws the house-style `TypeError` for an option that fails its check. */
export function fail(name: string, expectation: string, value: unknown): never {
  throw new TypeError(`Expected \`${name}\` to be ${expectation}, got ${describe(value)}`);
}

/** Checks an integer option `>= min`. */
export function checkInteger(name: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) fail(name, `an integer >= ${min}`, value);
  return value;
}

/** Checks a number option `>= min` (or `> min` when `exclusive`); Infinity is allowed only when `allowInfinity`. */
export function checkNumber(name: string, value: unknown, min: number, exclusive: boolean, allowInfinity: boolean): number {
  const ok =
    typeof value === 'number' &&
    !Number.isNaN(value) &&
    (exclusive ? value > min : value >= min) &&
    (allowInfinity || Number.isFinite(value));
  if (!ok) fail(name, `a ${allowInfinity ? '' : 'finite '}number ${exclusive ? '>' : '>='} ${min}`, value);
  return value as number;
}

function checkFunction(name: string, value: unknown): void {
  if (typeof value !== 'function') fail(name, 'a function', value);
}

/**
 * Applies the defaults and validates every option once, throwing `TypeError` on misuse.
 *
 * @example
 * ```ts
 * resolveOptions({ maxBatchSize: 0 }); // TypeError: Expected `maxBatchSize` to be an integer >= 1, got `0` (number)
 * ```
 */
export function resolveOptions<I>(options: BatcherOptions<I> | undefined): ResolvedOptions<I> {
  if (options !== undefined && (typeof options !== 'object' || options === null)) fail('options', 'an object', options);
  const defined = Object.fromEntries(Object.entries(options ?? {}).filter(([, value]) => value !== undefined));
  const resolved = { ...DEFAULT_OPTIONS, ...defined } as ResolvedOptions<I>;
  if (typeof resolved.name !== 'string' || resolved.name.length === 0) fail('name', 'a non-empty string', resolved.name);
  checkInteger('maxBatchSize', resolved.maxBatchSize, 1);
  checkNumber('batchWaitTimeoutMs', resolved.batchWaitTimeoutMs, 0, false, false);
  checkInteger('maxConcurrentBatches', resolved.maxConcurrentBatches, 1);
  checkInteger('maxQueueSize', resolved.maxQueueSize, 1);
  checkNumber('timeoutMs', resolved.timeoutMs, 0, true, true);
  checkNumber('executionTimeoutMs', resolved.executionTimeoutMs, 0, true, true);
  checkFunction('batchKey', resolved.batchKey);
  checkFunction('cost', resolved.cost);
  checkNumber('maxBatchCost', resolved.maxBatchCost, 0, true, true);
  if (!ON_BATCH_ERROR.includes(resolved.onBatchError)) {
    fail('onBatchError', `one of ${ON_BATCH_ERROR.map((v) => `'${v}'`).join(', ')}`, resolved.onBatchError);
  }
  checkNumber('retryAfterSeconds', resolved.retryAfterSeconds, 0, false, false);
  const { clock } = resolved;
  if (
    typeof clock !== 'object' ||
    clock === null ||
    typeof clock.now !== 'function' ||
    typeof clock.setTimeout !== 'function' ||
    typeof clock.clearTimeout !== 'function'
  ) {
    fail('clock', 'an object with `now`, `setTimeout` and `clearTimeout` functions', clock);
  }
  return resolved;
}

/**
 * Validates batcher options as `createBatcher` does, throwing the same `TypeError`; for integrations that take
 * options long before they create a batcher (decorators, modules) and must fail at startup.
 *
 * @example
 * ```ts
 * validateBatcherOptions({ maxBatchSize: 0 }); // TypeError: Expected `maxBatchSize` to be an integer >= 1, got `0` (number)
 * ```
 */
export function validateBatcherOptions(options: unknown): void {
  resolveOptions(options as BatcherOptions<unknown>);
}

/** Validates per-call options, throwing `TypeError` on misuse. */
export function checkCallOptions(options: CallOptions): void {
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  const { signal, timeoutMs, priority, onDispatch } = options;
  if (signal !== undefined && (typeof signal !== 'object' || signal === null || typeof signal.addEventListener !== 'function')) {
    fail('signal', 'an AbortSignal', signal);
  }
  if (timeoutMs !== undefined) checkNumber('timeoutMs', timeoutMs, 0, true, true);
  if (priority !== undefined) checkNumber('priority', priority, Number.NEGATIVE_INFINITY, true, false);
  if (onDispatch !== undefined) checkFunction('onDispatch', onDispatch);
}
