// The dashboard as a person sees it: a real headless chromium (Debian's, driven by playwright-core) loads the page
// from a server whose batcher and generation metrics are put under load, and the charts must draw data that
// changes. The screenshot lands in test/results/dashboard.png.
import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBatcher } from '@microbatch/core';
import { createGenerationMetrics, dashboardHandler, instrumentBatcher, metricsHandler } from '@microbatch/prometheus';
import { type Browser, type Page, chromium } from 'playwright-core';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const CHROMIUM = '/usr/bin/chromium';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let server: Server | undefined;
let browser: Browser | undefined;
let base = '';
const dashboard = { close: () => undefined as void };

beforeAll(async () => {
  const registry = new Registry();
  const batcher = createBatcher(
    async (inputs: number[]) => {
      await sleep(10);
      return inputs;
    },
    { name: 'generate', maxBatchSize: 8, maxQueueSize: 16 },
  );
  instrumentBatcher(batcher, { registry });
  const generation = createGenerationMetrics({ model: 'fake-model', registry });
  const page = dashboardHandler({ registry, title: 'microbatch · fake-model', intervalMs: 200, minutes: 1 });
  dashboard.close = () => page.close();
  const metrics = metricsHandler(registry);
  // A fake generation route: a batched "prefill", then 8 tokens 2 ms apart, reported as the serving endpoint does.
  const generate = async (): Promise<number> => {
    const timer = generation.start();
    try {
      await batcher.call(1, { onDispatch: () => timer.dispatched() });
      for (let token = 0; token < 8; token += 1) {
        await sleep(2);
        timer.token();
      }
      timer.finished({ prompt_tokens: 5, completion_tokens: 8 });
      return 200;
    } catch (error) {
      timer.failed(error);
      return 503;
    }
  };
  server = createServer((req, res) => {
    if (req.url?.startsWith('/dashboard') === true) return void page(req, res);
    if (req.url === '/metrics') return void metrics(req, res);
    void generate().then((status) => {
      res.statusCode = status;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  if (!existsSync(CHROMIUM)) throw new Error(`No ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium)`);
  browser = await chromium.launch({ executablePath: CHROMIUM });
});

afterAll(async () => {
  dashboard.close();
  await browser?.close();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
});

/** Each chart's count of drawn points and the text of its current values. */
async function charts(page: Page) {
  return page.$$eval('section.panel', (panels) =>
    panels.map((panel) => ({
      title: panel.querySelector('h2')?.textContent ?? '',
      points: Number(panel.querySelector('svg')?.dataset.points ?? 0),
      paths: [...panel.querySelectorAll('path')].map((path) => path.getAttribute('d') ?? ''),
      now: panel.querySelector('.now')?.textContent ?? '',
    })),
  );
}

describe('GET /dashboard in a headless browser', () => {
  it('draws batch sizes, queue, throughput, latency and refusals that change under load', async () => {
    const page = await (browser as Browser).newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(`${base}/dashboard`);
    expect(await page.title()).toBe('microbatch · fake-model');
    // Strings, not functions: they run in the page, whose DOM types this package does not compile against.
    await page.waitForFunction('Number(document.body.dataset.updates ?? 0) >= 1');
    const before = await charts(page);
    expect(before.map((chart) => chart.title)).toEqual([
      'Batch size',
      'Queue depth',
      'Throughput',
      'Token throughput',
      'Time to first token',
      'End-to-end latency',
      'Refusals',
    ]);
    // Load: waves of 40 concurrent requests (more than the queue holds, so some are refused), for a bounded
    // number of waves, until every chart has drawn points.
    let refused = 0;
    for (let wave = 0; wave < 200; wave += 1) {
      const statuses = await Promise.all(
        Array.from({ length: 40 }, async () => (await fetch(`${base}/generate`)).status),
      );
      refused += statuses.filter((status) => status === 503).length;
      const now = await charts(page);
      if (wave >= 5 && now.every((chart) => chart.points > 2)) break;
    }
    expect(refused).toBeGreaterThan(0);
    const after = await charts(page);
    expect(after.filter((chart) => chart.points <= 2).map((chart) => chart.title)).toEqual([]);
    // Data that changes: the drawn lines differ from the first ones, and keep changing as time passes.
    const unchanged = after.filter((chart, index) => chart.paths.join() === before[index]?.paths.join());
    expect(unchanged.map((chart) => chart.title)).toEqual([]);
    const updates = Number(await page.evaluate('document.body.dataset.updates'));
    await page.waitForFunction(`Number(document.body.dataset.updates) > ${updates + 1}`);
    const later = await charts(page);
    expect(later.map((chart) => chart.paths)).not.toEqual(after.map((chart) => chart.paths));
    expect(after.find((chart) => chart.title === 'Batch size')?.now).toMatch(/batcher batch \d/);
    mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
    await page.screenshot({ path: new URL('./results/dashboard.png', import.meta.url).pathname });
    await page.close();
  });
});
