import type { BatcherBase } from '@microbatch/core';

/** Where log lines go: `console.log` by default. */
export type LogLine = (line: string) => void;

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
export function logBatches(batcher: BatcherBase, log: LogLine = console.log): () => void {
  if (typeof log !== 'function') {
    throw new TypeError(`Expected \`log\` to be a function, got \`${String(log)}\` (${typeof log})`);
  }
  // Queue times are only known at the start and execution time only at the end; one line needs both.
  const queueTimes = new Map<number, readonly number[]>();
  const offStart = batcher.on('batchStart', ({ batchId, queueTimesMs }) => queueTimes.set(batchId, queueTimesMs));
  const offEnd = batcher.on('batchEnd', ({ batchId, batchSize, executionMs, failed }) => {
    const waits = queueTimes.get(batchId) ?? [];
    queueTimes.delete(batchId);
    const mean = waits.length === 0 ? 0 : waits.reduce((sum, wait) => sum + wait, 0) / waits.length;
    const max = Math.max(0, ...waits);
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
