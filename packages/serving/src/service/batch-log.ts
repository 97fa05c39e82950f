import type { BatcherBase } from '@microbatch/core';
import type { DecodeActivity } from '@microbatch/inference';
import { fail } from '@microbatch/core/util';

/** Where log lines go: `console.log` by default. */
export type LogLine = (line: string) => void;

/**
 * A pino-compatible logger (pino, its child loggers, Fastify's `app.log`): facts go as fields, with a short message.
 *
 * @example
 * ```ts
 * const logger: Logger = pino();
 * ```
 */
export interface Logger {
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
}

/** Where logs go: a line printer (`console.log`), or a pino-compatible {@link Logger} for structured logs. */
export type LogTarget = LogLine | Logger;

/** Whether `target` is a pino-compatible logger rather than a line printer. */
export function isLogger(target: unknown): target is Logger {
  return (
    typeof target === 'object' &&
    target !== null &&
    typeof (target as Logger).info === 'function' &&
    typeof (target as Logger).warn === 'function'
  );
}

function checkLogTarget(log: unknown): void {
  if (typeof log !== 'function' && !isLogger(log)) fail('log', 'a function or a pino-compatible logger', log);
}

const round1 = (value: number): number => Math.round(value * 10) / 10;

/**
 * Logs ONE line per batch of `batcher` when its handler call ends: its size, its items' queue wait (mean and max)
 * and the execution time, from the batcher's `batchStart` / `batchEnd` events. Returns the function that stops it.
 *
 * @example
 * ```ts
 * logBatches(generate);
 * // [generate] batch 3: size 4, queue wait 1.9 ms (max 3.2 ms), execution 35.1 ms
 * ```
 */
export function logBatches(batcher: BatcherBase, log: LogTarget = console.log): () => void {
  checkLogTarget(log);
  // Queue times are only known at the start and execution time only at the end; one line needs both.
  const queueTimes = new Map<number, readonly number[]>();
  const offStart = batcher.on('batchStart', ({ batchId, queueTimesMs }) => queueTimes.set(batchId, queueTimesMs));
  const offEnd = batcher.on('batchEnd', ({ batchId, batchSize, executionMs, failed }) => {
    const waits = queueTimes.get(batchId) ?? [];
    queueTimes.delete(batchId);
    const mean = waits.length === 0 ? 0 : waits.reduce((sum, wait) => sum + wait, 0) / waits.length;
    const max = Math.max(0, ...waits);
    if (isLogger(log)) {
      log.info(
        {
          batcher: batcher.name,
          batchId,
          batchSize,
          queueWaitMs: round1(mean),
          maxQueueWaitMs: round1(max),
          executionMs: round1(executionMs),
          failed,
        },
        'batch',
      );
      return;
    }
    const failures = failed === 0 ? '' : `, ${failed} failed`;
    log(
      `[${batcher.name}] batch ${batchId}: size ${batchSize}, queue wait ${mean.toFixed(1)} ms ` +
        `(max ${max.toFixed(1)} ms), execution ${executionMs.toFixed(1)} ms${failures}`,
    );
  });
  return () => {
    offStart();
    offEnd();
    queueTimes.clear();
  };
}

/**
 * Where a continuous text-generation model's decode loops report what they do: a worker pool of
 * `@microbatch/inference` (`pool.onDecodeActivity`).
 *
 * @example
 * ```ts
 * const source: DecodeLoopSource = model.pool;
 * ```
 */
export interface DecodeLoopSource {
  readonly name: string;
  onDecodeActivity(listener: (activity: DecodeActivity) => void): () => void;
}

/**
 * Logs what the decode loops of continuous scheduling did, at most once per `intervalMs` and only when they did
 * something: steps, rows per step (mean and max: the real batch sizes), tokens/s, the sequences that joined and
 * left, and, with a prefix cache (`runner.prefixCacheMb` > 0) and prompts looked up in it, how many reused cached
 * blocks and the prompt tokens they reused. Under continuous scheduling the batchers hand the loop one request at a time, so their per-batch lines
 * ({@link logBatches}) would only say "size 1"; this is the batching that runs. Returns the function that stops it
 * (and logs what the current window has seen).
 *
 * @example
 * ```ts
 * logDecodeLoop(model.pool);
 * // [inference] decode loop, last 1.0 s: 412 steps, 6.3 rows per step (max 9), 2601 tokens/s, 9 joined, 9 left,
 * //   prefix cache 6/9 hits, 192 tokens reused
 * ```
 */
export function logDecodeLoop(source: DecodeLoopSource, log: LogTarget = console.log, intervalMs = 1_000): () => void {
  checkLogTarget(log);
  if (typeof source !== 'object' || source === null || typeof source.onDecodeActivity !== 'function') {
    fail('source', 'a worker pool of `@microbatch/inference` (with `onDecodeActivity`)', source);
  }
  let steps = 0;
  let rows = 0;
  let maxRows = 0;
  let tokens = 0;
  let joined = 0;
  let left = 0;
  // The prefix cache's, for the window (all 0 without a cache: the loop looks every newcomer up when it has one).
  let lookups = 0;
  let hits = 0;
  let cachedTokens = 0;
  let windowStart = 0;
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    timer = undefined;
    if (steps === 0 && joined === 0 && left === 0) return;
    const windowMs = Math.max(1, performance.now() - windowStart);
    const meanRows = steps === 0 ? 0 : rows / steps;
    const tokensPerSecond = Math.round((tokens * 1_000) / windowMs);
    // Only when prompts were looked up in a prefix cache: a loop without one never looks any up.
    const cache =
      lookups === 0
        ? undefined
        : { prefixCacheLookups: lookups, prefixCacheHits: hits, prefixCacheTokens: cachedTokens };
    if (isLogger(log)) {
      log.info(
        {
          pool: source.name,
          windowMs: Math.round(windowMs),
          steps,
          meanRows: round1(meanRows),
          maxRows,
          tokensPerSecond,
          joined,
          left,
          ...cache,
        },
        'decode loop',
      );
    } else {
      log(
        `[${source.name}] decode loop, last ${(windowMs / 1_000).toFixed(1)} s: ${steps} steps, ` +
          `${meanRows.toFixed(1)} rows per step (max ${maxRows}), ${tokensPerSecond} tokens/s, ` +
          `${joined} joined, ${left} left` +
          (cache === undefined ? '' : `, prefix cache ${hits}/${lookups} hits, ${cachedTokens} tokens reused`),
      );
    }
    steps = rows = maxRows = tokens = joined = left = 0;
    lookups = hits = cachedTokens = 0;
    // The next window opens now: at most one line per interval.
    windowStart = performance.now();
    timer = setTimeout(flush, intervalMs);
    timer.unref();
  };
  const off = source.onDecodeActivity((activity) => {
    if (timer === undefined) {
      // The report covers the worker's last `activity.ms`: the window starts where it did.
      windowStart = performance.now() - activity.ms;
      timer = setTimeout(flush, intervalMs);
      timer.unref();
    }
    steps += activity.steps;
    tokens += activity.tokens;
    joined += activity.joined;
    left += activity.left;
    lookups += activity.prefixCacheLookups;
    hits += activity.prefixCacheHits;
    cachedTokens += activity.prefixCacheTokens;
    activity.stepsByRows.forEach((count, size) => {
      rows += count * size;
      if (count > 0) maxRows = Math.max(maxRows, size);
    });
  });
  return () => {
    off();
    if (timer !== undefined) clearTimeout(timer);
    // What the last window saw is logged now rather than lost.
    flush();
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  };
}

/** Refusals that mean "too much work now": worth a log line, never one per request. */
const OVERLOAD_REASONS: ReadonlySet<string> = new Set(['OVERLOADED', 'QUEUE_FULL']);

/**
 * Logs refused requests (`OVERLOADED`, `QUEUE_FULL`) at most once per second per batcher, with their count by
 * reason, so an overload shows in the log without flooding it. Returns the function that stops it.
 *
 * @example
 * ```ts
 * logRefusals(generate);
 * // [generate] refused 37 requests in the last 1.0 s (OVERLOADED 30, QUEUE_FULL 7)
 * ```
 */
export function logRefusals(batcher: BatcherBase, log: LogTarget = console.log, intervalMs = 1_000): () => void {
  checkLogTarget(log);
  const counts = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let windowStart = 0;
  const flush = (): void => {
    timer = undefined;
    if (counts.size === 0) return;
    const total = [...counts.values()].reduce((sum, count) => sum + count, 0);
    const reasons = [...counts].map(([reason, count]) => `${reason} ${count}`).join(', ');
    const windowMs = performance.now() - windowStart;
    const seconds = (windowMs / 1_000).toFixed(1);
    if (isLogger(log))
      log.warn(
        { batcher: batcher.name, refused: total, reasons: Object.fromEntries(counts), windowMs: Math.round(windowMs) },
        'refused requests',
      );
    else
      log(`[${batcher.name}] refused ${total} request${total === 1 ? '' : 's'} in the last ${seconds} s (${reasons})`);
    counts.clear();
    // The next window opens now: at most one line per interval, and the first refusal of a quiet spell waits.
    windowStart = performance.now();
    timer = setTimeout(flush, intervalMs);
    timer.unref();
  };
  const off = batcher.on('reject', ({ reason }) => {
    if (!OVERLOAD_REASONS.has(reason)) return;
    counts.set(reason, (counts.get(reason) ?? 0) + 1);
    if (timer === undefined) {
      windowStart = performance.now();
      timer = setTimeout(flush, intervalMs);
      timer.unref();
    }
  });
  return () => {
    off();
    if (timer !== undefined) clearTimeout(timer);
    counts.clear();
  };
}

/**
 * Logs, once at start, that a text-generation model runs under request scheduling because its graph has no KV cache
 * (inference's `schedulingForGraph` fallback): a warning, since the user left the scheduling to the model.
 *
 * @example
 * ```ts
 * logSchedulingFallback('onnx/model.onnx has no KV cache ...; serving it with request scheduling', logger);
 * ```
 */
export function logSchedulingFallback(why: string, log: LogTarget = console.log): void {
  if (isLogger(log)) log.warn({ scheduling: 'request' }, why);
  else log(`microbatch: ${why}`);
}
