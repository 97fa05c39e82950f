import type { BatcherOptions, CallOptions, Clock, OnBatchError } from './types.js';
import { describeValue } from './util/describe-value.js';
import { MAX_FINITE, checkFunction, checkInteger, checkNumber, checkOneOf, fail } from './util/checks.js';
import { dropUndefined } from './util/defined.js';
import { type BatchTracer, checkTracer } from './tracing.js';

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

/** The batcher options whose defaults are plain values (all but `batchKey`, `cost`, `clock` and `tracer`). */
export type BatcherDefaults = Readonly<
  Required<Omit<BatcherOptions<unknown>, 'batchKey' | 'cost' | 'clock' | 'tracer'>>
>;

/**
 * The batcher's defaults, one frozen object: what `createBatcher` applies to every option not given (each one is
 * documented with its `@default` on {@link BatcherOptions}). Packages and apps that expose these settings (flags,
 * environment variables, module options) read their defaults from here instead of writing them again, so that a
 * default changed here is changed everywhere. `batchKey` (none), `cost` (1 per input) and `clock` (the system's)
 * default to functions and are left out.
 *
 * | option | default |
 * | --- | --- |
 * | `name` | `'default'` |
 * | `maxBatchSize` | `8` |
 * | `batchWaitTimeoutMs` | `0` (work-conserving) |
 * | `maxConcurrentBatches` | `1` |
 * | `maxQueueSize` | `1024` |
 * | `maxLatencyMs` | `Infinity` (no latency limit) |
 * | `timeoutMs` | `Infinity` |
 * | `executionTimeoutMs` | `Infinity` |
 * | `maxBatchCost` | `Infinity` |
 * | `onBatchError` | `'fail-batch'` |
 * | `retryAfterSeconds` | `1` |
 *
 * @example
 * ```ts
 * import { DEFAULTS } from '@microbatch/core';
 *
 * program.option('--max-batch-size <n>', 'inputs per model call', String(DEFAULTS.maxBatchSize)); // '8'
 * ```
 */
export const DEFAULTS: BatcherDefaults = Object.freeze({
  name: 'default',
  maxBatchSize: 8,
  batchWaitTimeoutMs: 0,
  maxConcurrentBatches: 1,
  maxQueueSize: 1024,
  maxLatencyMs: Number.POSITIVE_INFINITY,
  timeoutMs: Number.POSITIVE_INFINITY,
  executionTimeoutMs: Number.POSITIVE_INFINITY,
  maxBatchCost: Number.POSITIVE_INFINITY,
  onBatchError: 'fail-batch',
  retryAfterSeconds: 1,
});

/** The default `tracer`: none. The engine compares with it and then does no tracing work at all. */
export const NO_TRACER: BatchTracer = Object.freeze({ capture: () => undefined, startBatch: () => undefined });

/** {@link DEFAULTS} with the defaults of the function options: what `resolveOptions` applies. */
export const DEFAULT_OPTIONS: Required<BatcherOptions<unknown>> = Object.freeze({
  ...DEFAULTS,
  batchKey: () => undefined,
  cost: () => 1,
  clock: systemClock,
  tracer: NO_TRACER,
});

const ON_BATCH_ERROR: readonly OnBatchError[] = ['fail-batch', 'isolate'];

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
  const defined = options === undefined ? {} : dropUndefined(options);
  const resolved = { ...DEFAULT_OPTIONS, ...defined } as ResolvedOptions<I>;
  if (typeof resolved.name !== 'string' || resolved.name.length === 0)
    fail('name', 'a non-empty string', resolved.name);
  checkInteger('maxBatchSize', resolved.maxBatchSize, 1);
  checkNumber('batchWaitTimeoutMs', resolved.batchWaitTimeoutMs, 0, MAX_FINITE);
  checkInteger('maxConcurrentBatches', resolved.maxConcurrentBatches, 1);
  checkInteger('maxQueueSize', resolved.maxQueueSize, 1);
  checkNumber('maxLatencyMs', resolved.maxLatencyMs, 0, Number.POSITIVE_INFINITY, true);
  checkNumber('timeoutMs', resolved.timeoutMs, 0, Number.POSITIVE_INFINITY, true);
  checkNumber('executionTimeoutMs', resolved.executionTimeoutMs, 0, Number.POSITIVE_INFINITY, true);
  checkFunction('batchKey', resolved.batchKey);
  checkFunction('cost', resolved.cost);
  checkNumber('maxBatchCost', resolved.maxBatchCost, 0, Number.POSITIVE_INFINITY, true);
  checkOneOf('onBatchError', resolved.onBatchError, ON_BATCH_ERROR);
  checkNumber('retryAfterSeconds', resolved.retryAfterSeconds, 0, MAX_FINITE);
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
  checkTracer(resolved.tracer);
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
  const { signal, timeoutMs, priority, onDispatch, maxLatencyMs, fairnessKey } = options;
  if (
    signal !== undefined &&
    (typeof signal !== 'object' || signal === null || typeof signal.addEventListener !== 'function')
  ) {
    fail('signal', 'an AbortSignal', signal);
  }
  if (timeoutMs !== undefined) checkNumber('timeoutMs', timeoutMs, 0, Number.POSITIVE_INFINITY, true);
  if (priority !== undefined) checkNumber('priority', priority, -MAX_FINITE, MAX_FINITE);
  if (onDispatch !== undefined) checkFunction('onDispatch', onDispatch);
  if (maxLatencyMs !== undefined) checkNumber('maxLatencyMs', maxLatencyMs, 0, Number.POSITIVE_INFINITY, true);
  if (fairnessKey !== undefined) checkFairnessKey(fairnessKey);
}

/** Longest `fairnessKey` string: keys often come from requests, and each active one is kept while it has work. */
const MAX_FAIRNESS_KEY_LENGTH = 256;

function checkFairnessKey(value: unknown): void {
  const ok =
    (typeof value === 'string' && value.length <= MAX_FAIRNESS_KEY_LENGTH) ||
    (typeof value === 'number' && Number.isFinite(value));
  if (!ok) fail('fairnessKey', `a string of at most ${MAX_FAIRNESS_KEY_LENGTH} characters or a finite number`, value);
}

/** The options that may change after creation (`batcher.maxBatchSize = 16`), shared by the engine's parts. */
export class Settings {
  maxBatchSize: number;
  batchWaitTimeoutMs: number;
  maxConcurrentBatches: number;

  constructor(options: ResolvedOptions<unknown>) {
    this.maxBatchSize = options.maxBatchSize;
    this.batchWaitTimeoutMs = options.batchWaitTimeoutMs;
    this.maxConcurrentBatches = options.maxConcurrentBatches;
  }
}

/**
 * The `TypeError` for a handler that is not a function.
 *
 * @example
 * ```ts
 * checkHandler(1); // TypeError: Expected `handler` to be a function, got `1` (number)
 * ```
 */
export function checkHandler(handler: unknown): void {
  if (typeof handler !== 'function')
    throw new TypeError(`Expected \`handler\` to be a function, got ${describeValue(handler)}`);
}
