// OpenAI's embeddings API on Koa: every input of every request is one batched item costing its tokens.
import { Router } from '@koa/router';
import { batchErrorHandler, jsonBody } from '@microbatch/koa';
import { createHealth, instrumentBatcher, scrapeMetrics } from '@microbatch/prometheus';
import Koa from 'koa';
import { Registry } from 'prom-client';
import type { EmbeddingService } from '../embedding-model.js';
import { createEmbeddingsEndpoint } from '../embeddings-endpoint.js';
import type { EmbeddingsRequestLimits } from '../embeddings-request.js';
import { noEmbeddingsRoute } from '../embeddings-routes.js';
import { modelList } from '../models-endpoint.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';

/**
 * The embeddings routes on Koa: `POST /v1/embeddings`, `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`.
 *
 * @example
 * ```ts
 * createEmbeddingsApp(createEmbeddingModel({ model: 'models/all-MiniLM-L6-v2' })).listen(8000);
 * ```
 */
export function createEmbeddingsApp(
  service: EmbeddingService,
  options: { readonly limits?: EmbeddingsRequestLimits } = {},
): Koa {
  const router = new Router();
  const embeddings = createEmbeddingsEndpoint(service, options.limits);
  router.post('/v1/embeddings', jsonBody(), async (ctx) => {
    ctx.respond = false;
    await embeddings((ctx.request as { body?: unknown }).body, ctx.res);
  });
  const models = modelList(service.id, new Date());
  router.get('/v1/models', (ctx) => {
    ctx.body = models;
  });
  const health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
  router.get('/healthz', (ctx) => {
    ({ status: ctx.status, body: ctx.body } = health.liveness());
  });
  router.get('/readyz', async (ctx) => {
    ({ status: ctx.status, body: ctx.body } = await health.readiness());
  });
  const registry = new Registry();
  for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
  router.get('/metrics', async (ctx) => {
    ({ status: ctx.status, contentType: ctx.type, body: ctx.body } = await scrapeMetrics(registry));
  });
  const app = new Koa();
  app.use(batchErrorHandler());
  app.use(router.routes());
  app.use((ctx) => {
    throw noEmbeddingsRoute(ctx.method, ctx.path);
  });
  return app;
}

/**
 * Listens with {@link createEmbeddingsApp} at once; `shutdown` drains the batcher and closes the model.
 *
 * @example
 * ```ts
 * const running = await startEmbeddingsApp(model, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startEmbeddingsApp(service: EmbeddingService, where: ListenOptions): Promise<RunningServer> {
  const callback = createEmbeddingsApp(service).callback();
  return startServer((req, res) => void callback(req, res), where, service);
}
