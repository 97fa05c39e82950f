import 'reflect-metadata';
import { createServer } from 'node:http';
import { Router } from '@koa/router';
import { createBatcher } from '@microbatch/core';
import { Controller, Get, type INestApplication, Module, Res } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import express from 'express';
import Koa from 'koa';
import request from 'supertest';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type Health,
  type Instrumentation,
  createHealth,
  instrumentBatcher,
  metricsHandler,
  scrapeMetrics,
  toNodeHandler,
} from '@microbatch/prometheus';
import { samplesOf } from '@microbatch/test-kit';
import { type OpenMetricsContentType, Registry } from 'prom-client';

const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';
const JSON_UTF8 = 'application/json; charset=utf-8';

let registry: Registry;
let loaded: boolean;
let health: Health;
let adder: ReturnType<typeof createBatcher<number, number>>;
let instrumentation: Instrumentation;

beforeEach(async () => {
  registry = new Registry();
  loaded = false;
  // maxBatchSize 1: each call is dispatched at once, so the counts below do not depend on timing.
  adder = createBatcher(async (xs: number[]) => xs.map((x) => x + 1), { name: 'adder', maxBatchSize: 1 });
  instrumentation = instrumentBatcher(adder, { registry });
  health = createHealth({ batchers: [adder], ready: () => loaded });
  await adder(1);
});

afterEach(() => {
  instrumentation.unregister();
});

/** Scrapes /metrics, /healthz and /readyz (before and after the model loads, and after close()) and checks them. */
async function checkEndpoints(agent: () => ReturnType<typeof request>): Promise<void> {
  const metrics = await agent().get('/metrics');
  expect(metrics.status).toBe(200);
  expect(metrics.headers['content-type']).toBe(PROMETHEUS_TEXT);
  expect(samplesOf(metrics.text, 'microbatch_batches_total')).toEqual(['microbatch_batches_total{name="adder"} 1']);
  expect(samplesOf(metrics.text, 'microbatch_items_total')).toEqual(['microbatch_items_total{name="adder"} 1']);

  const live = await agent().get('/healthz');
  expect([live.status, live.body]).toEqual([200, { status: 'ok' }]);
  let ready = await agent().get('/readyz');
  expect([ready.status, ready.body]).toEqual([503, { status: 'unavailable', reasons: ['model is not ready'] }]);
  expect(ready.headers['content-type']).toMatch(/^application\/json/);
  loaded = true;
  ready = await agent().get('/readyz');
  expect([ready.status, ready.body]).toEqual([200, { status: 'ok' }]);
  await adder.close();
  ready = await agent().get('/readyz');
  expect([ready.status, ready.body]).toEqual([503, { status: 'unavailable', reasons: ['batcher "adder" is closed'] }]);
}

describe('Express', () => {
  it('mounts /metrics, /healthz and /readyz in one line each (README)', async () => {
    const app = express();
    app.get('/metrics', metricsHandler(registry));
    app.get('/healthz', toNodeHandler(health.liveness));
    app.get('/readyz', toNodeHandler(health.readiness));
    await checkEndpoints(() => request(app));
    const metrics = await request(app).get('/metrics');
    expect(metrics.headers['cache-control']).toBe('no-store');
    const ready = await request(app).get('/readyz');
    expect(ready.headers['content-type']).toBe(JSON_UTF8);
  });

  it('sends an OpenMetrics registry with its own Content-Type', async () => {
    const openMetrics = new Registry<OpenMetricsContentType>();
    openMetrics.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
    const other = createBatcher(async (xs: number[]) => xs, { name: 'other' });
    const instrumented = instrumentBatcher(other, { registry: openMetrics });
    try {
      const app = express();
      app.get('/metrics', metricsHandler(openMetrics));
      const response = await request(app).get('/metrics');
      expect(response.headers['content-type']).toBe('application/openmetrics-text; version=1.0.0; charset=utf-8');
      expect(response.text).toContain('microbatch_batches_total{name="other"} 0\n');
      expect(response.text.endsWith('# EOF\n')).toBe(true);
    } finally {
      instrumented.unregister();
    }
  });

  it('passes a failure to the app’s error handler', async () => {
    registry.registerMetric(
      // A metric whose collection fails, so the scrape itself does.
      new (class {
        name = 'broken';
        get = async () => {
          throw new Error('collector failed');
        };
        reset = () => undefined;
      })() as never,
    );
    const app = express();
    app.get('/metrics', metricsHandler(registry));
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).type('text').send(`handled: ${error.message}`);
    });
    const response = await request(app).get('/metrics');
    expect([response.status, response.text]).toEqual([500, 'handled: collector failed']);
  });
});

describe('node:http', () => {
  it('passes a failure to `next` when it is given one, as Express 4 and Connect do', async () => {
    const handler = toNodeHandler(async () => {
      throw new Error('collector failed');
    });
    const server = createServer((req, res) => {
      void handler(req, res, (error: Error) => {
        res.statusCode = 502;
        res.end(`next: ${error.message}`);
      });
    });
    const response = await request(server).get('/');
    expect([response.status, response.text]).toEqual([502, 'next: collector failed']);
  });

  it('answers a failure 500 without its message when there is no framework to pass it to', async () => {
    const handler = toNodeHandler(() => {
      throw new Error('password=hunter2');
    });
    const server = createServer((req, res) => void handler(req, res));
    const response = await request(server).get('/');
    expect([response.status, response.headers['content-type'], response.text]).toEqual([
      500,
      'text/plain; charset=utf-8',
      'Internal Server Error',
    ]);
  });
});

describe('Koa', () => {
  it('mounts /metrics, /healthz and /readyz in one line each (README)', async () => {
    const app = new Koa();
    const router = new Router();
    router.get('/metrics', async (ctx) => {
      ({ contentType: ctx.type, body: ctx.body } = await scrapeMetrics(registry));
    });
    router.get('/healthz', (ctx) => {
      ({ status: ctx.status, body: ctx.body } = health.liveness());
    });
    router.get('/readyz', async (ctx) => {
      ({ status: ctx.status, body: ctx.body } = await health.readiness());
    });
    app.use(router.routes());
    const callback = app.callback();
    const server = createServer((req, res) => void callback(req, res));
    await checkEndpoints(() => request(server));
  });
});

describe('NestJS', () => {
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('mounts the handlers on the Express platform’s adapter in one line each (README)', async () => {
    @Module({})
    class AppModule {}
    app = await NestFactory.create(AppModule, new ExpressAdapter(), { logger: false });
    const http = app.getHttpAdapter();
    http.get('/metrics', metricsHandler(registry));
    http.get('/healthz', toNodeHandler(health.liveness));
    http.get('/readyz', toNodeHandler(health.readiness));
    await app.init();
    const server = app.getHttpServer() as Parameters<typeof request>[0];
    await checkEndpoints(() => request(server));
  });

  it.each(['express', 'fastify'] as const)(
    'serves metrics and readiness from a controller (README, %s)',
    async (platform) => {
      @Controller()
      class ObservabilityController {
        @Get('metrics')
        async metrics(@Res({ passthrough: true }) res: { header(name: string, value: string): unknown }) {
          const { contentType, body } = await scrapeMetrics(registry);
          res.header('Content-Type', contentType);
          return body;
        }

        @Get('readyz')
        async readyz(@Res({ passthrough: true }) res: { status(code: number): unknown }) {
          const { status, body } = await health.readiness();
          res.status(status);
          return body;
        }
      }
      @Module({ controllers: [ObservabilityController] })
      class AppModule {}
      app = await NestFactory.create(AppModule, platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(), {
        logger: false,
      });
      await app.init();
      if (platform === 'fastify') await (app.getHttpAdapter().getInstance() as { ready(): Promise<unknown> }).ready();
      const server = app.getHttpServer() as Parameters<typeof request>[0];

      const metrics = await request(server).get('/metrics');
      expect([metrics.status, metrics.headers['content-type']]).toEqual([200, PROMETHEUS_TEXT]);
      expect(samplesOf(metrics.text, 'microbatch_batches_total')).toEqual(['microbatch_batches_total{name="adder"} 1']);
      let ready = await request(server).get('/readyz');
      expect([ready.status, ready.body]).toEqual([503, { status: 'unavailable', reasons: ['model is not ready'] }]);
      loaded = true;
      ready = await request(server).get('/readyz');
      expect([ready.status, ready.body]).toEqual([200, { status: 'ok' }]);
    },
  );
});
