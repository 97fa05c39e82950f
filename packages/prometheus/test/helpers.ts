// Support for the metrics tests in the root `test/` folder. prom-client is a dependency of this package, not of the
// `test/` workspace, so those tests import it from here, where it resolves to the copy the package itself uses.
export { Registry, register } from 'prom-client';
export type { OpenMetricsContentType } from 'prom-client';

/**
 * The sample lines of one metric in an exposition text, in order: `name{...} value` for counters and gauges, and
 * the `_bucket`, `_sum` and `_count` lines for histograms. Comments and other metrics are left out.
 */
export function samplesOf(text: string, metric: string): string[] {
  const own = new RegExp(`^${metric}(?:_bucket|_sum|_count)?(?:\\{| )`);
  return text.split('\n').filter((line) => own.test(line));
}
