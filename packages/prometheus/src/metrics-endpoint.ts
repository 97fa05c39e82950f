import { register } from 'prom-client';
import { type HttpResult, type NodeHandler, toNodeHandler } from './node-handler.js';
import { type AnyRegistry, checkRegistry } from './options.js';

/** What {@link scrapeMetrics} returns: the exposition text and the registry's own Content-Type. */
export interface MetricsResult extends HttpResult<string> {
  readonly contentType: string;
}

/**
 * Renders a registry in its exposition format, with the matching Content-Type, for any framework to send.
 *
 * @example
 * ```ts
 * // Koa (@koa/router)
 * router.get('/metrics', async (ctx) => { ({ contentType: ctx.type, body: ctx.body } = await scrapeMetrics(registry)); });
 * ```
 */
export async function scrapeMetrics(registry?: AnyRegistry): Promise<MetricsResult> {
  const target = registry === undefined ? register : checkRegistry('registry', registry);
  return { status: 200, contentType: target.contentType, body: await target.metrics() };
}

/**
 * A `(req, res)` handler serving a registry (prom-client's global `register` by default) for Prometheus to scrape.
 *
 * @example
 * ```ts
 * app.get('/metrics', metricsHandler(registry)); // Express, or Nest's app.getHttpAdapter()
 * ```
 */
export function metricsHandler(registry?: AnyRegistry): NodeHandler {
  // Checked now, so a wrong argument fails at startup rather than on the first scrape.
  if (registry !== undefined) checkRegistry('registry', registry);
  return toNodeHandler(() => scrapeMetrics(registry));
}
