/**
 * The sample lines of one metric in a Prometheus exposition text, in order: `name{...} value` for counters and
 * gauges, and the `_bucket`, `_sum` and `_count` lines for histograms. Comments and other metrics are left out.
 *
 * @example
 * ```ts
 * samplesOf(await registry.metrics(), 'microbatch_batches_total'); // ['microbatch_batches_total{batcher="a"} 3']
 * ```
 */
export function samplesOf(text: string, metric: string): string[] {
  const own = new RegExp(`^${metric}(?:_bucket|_sum|_count)?(?:\\{| )`);
  return text.split('\n').filter((line) => own.test(line));
}
