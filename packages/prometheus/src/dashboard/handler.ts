import type { IncomingMessage, ServerResponse } from 'node:http';
import { checkNumber, fail, isObjectLike } from '@microbatch/core/util';
import { register } from 'prom-client';
import type { NodeHandler } from '../node-handler.js';
import { type AnyRegistry, checkRegistry } from '../options.js';
import { dashboardPage } from './page.js';
import { type DashboardPoint, Sampler } from './sampler.js';

/** Options of {@link dashboardHandler}. */
export interface DashboardOptions {
  /**
   * The registry the batchers are instrumented into (`instrumentBatcher`) and the generation metrics live in.
   * @default prom-client's global `register`
   */
  readonly registry?: AnyRegistry;
  /**
   * The page's title.
   * @default 'microbatch'
   */
  readonly title?: string;
  /**
   * How often the registry is read and the page refreshes, in ms.
   * @default 1000
   */
  readonly intervalMs?: number;
  /**
   * How many minutes the charts show.
   * @default 5
   */
  readonly minutes?: number;
  /**
   * The prefix the batchers were instrumented with.
   * @default 'microbatch_'
   */
  readonly prefix?: string;
}

/** What `GET <dashboard>?data=1` answers: the chart points and what they span. */
export interface DashboardData {
  readonly title: string;
  readonly now: number;
  readonly intervalMs: number;
  readonly windowMs: number;
  readonly points: readonly DashboardPoint[];
}

/** A dashboard handler; `close()` stops its sampling timer. */
export type DashboardHandler = NodeHandler & { close(): void };

/**
 * A live dashboard of a registry's batching and generation metrics, as a `(req, res)` handler: batch sizes (and
 * decode rows per step under continuous batching), queue depth, throughput in items/s and tokens/s, time to first
 * token and end-to-end latency percentiles, and refusals over the last minutes. `GET` answers the page, a
 * self-contained HTML document whose SVG charts poll `GET ...?data=1` (JSON) every `intervalMs`; mount it at any path.
 * The registry is read once per interval from the first request on (an unref'd timer; `close()` stops it).
 *
 * @example
 * ```ts
 * app.get('/dashboard', dashboardHandler({ registry })); // Express, node:http, Nest's HTTP adapter
 * router.get('/dashboard', (ctx) => { ctx.respond = false; return dashboard(ctx.req, ctx.res); }); // Koa
 * ```
 */
export function dashboardHandler(options: DashboardOptions = {}): DashboardHandler {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const registry =
    options.registry === undefined ? register : checkRegistry('registry', (options as DashboardOptions).registry);
  const { title = 'microbatch', intervalMs = 1000, minutes = 5, prefix = 'microbatch_' } = options as DashboardOptions;
  if (typeof title !== 'string') fail('title', 'a string', title);
  if (typeof prefix !== 'string') fail('prefix', 'a string', prefix);
  checkNumber('intervalMs', intervalMs, 50, 60_000);
  checkNumber('minutes', minutes, 1, 60);
  const windowMs = minutes * 60_000;
  // Percentiles over the last 10 s: long enough to hold a few requests, short enough to follow a change in load.
  const sampler = new Sampler(
    registry,
    prefix,
    Math.ceil(windowMs / intervalMs) + 1,
    Math.max(1, Math.round(10_000 / intervalMs)),
  );
  const page = dashboardPage(title);
  let timer: ReturnType<typeof setInterval> | undefined;
  const start = (): void => {
    if (timer !== undefined) return;
    void sampler.sample();
    timer = setInterval(() => void sampler.sample().catch(() => undefined), intervalMs);
    timer.unref();
  };
  const handler = async (req: IncomingMessage, res: ServerResponse, next?: unknown): Promise<void> => {
    try {
      start();
      const wantsData = new URL(req.url ?? '/', 'http://localhost').searchParams.has('data');
      // Set, not assumed: a framework may have put its own default there (Koa starts every response at 404).
      res.statusCode = 200;
      res.setHeader('Cache-Control', 'no-store');
      if (!wantsData) {
        res.setHeader('Content-Type', 'text/html; charset=utf-8');
        res.end(page);
        return;
      }
      const data: DashboardData = { title, now: Date.now(), intervalMs, windowMs, points: sampler.points() };
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.end(JSON.stringify(data));
    } catch (error) {
      if (typeof next === 'function') return (next as (error: unknown) => void)(error);
      res.statusCode = 500;
      res.end('Internal Server Error');
    }
  };
  return Object.assign(handler, {
    close: () => {
      clearInterval(timer);
      timer = undefined;
    },
  });
}
