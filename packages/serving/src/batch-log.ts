import type { BatcherBase } from '@microbatch/core';

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
  if (typeof log !== 'function' && !isLogger(log)) {
    throw new TypeError(
      `Expected \`log\` to be a function or a pino-compatible logger, got \`${String(log)}\` (${typeof log})`,
    );
  }
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
