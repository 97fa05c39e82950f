// OpenAI's embeddings API on Hono (served by `@hono/node-server`): every input of every request is one batched item
// costing its tokens.
import { batchErrorHandler, errorResponse } from '@microbatch/hono';
import { createHealth, instrumentBatcher, metricsHandler, toNodeHandler } from '@microbatch/prometheus';
import { Hono } from 'hono';
import { Registry } from 'prom-client';
import type { EmbeddingService } from '../embedding-model.js';
import { createEmbeddingsEndpoint } from '../embeddings-endpoint.js';
import type { EmbeddingsRequestLimits } from '../embeddings-request.js';
import { noEmbeddingsRoute } from '../embeddings-routes.js';
import { modelList } from '../models-endpoint.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import { getNode, nodeListener, postJson } from './node-routes.js';

/**
 * The embeddings routes on Hono: `POST /v1/embeddings`, `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`. Serve
 * it with `@hono/node-server` (the endpoint writes the Node response).
 *
 * @example
 * ```ts
 * serve({ fetch: createEmbeddingsApp(createEmbeddingModel({ model: 'models/all-MiniLM-L6-v2' })).fetch, port: 8000 });
 * ```
 */
export function createEmbeddingsApp(
  service: EmbeddingService,
  options: { readonly limits?: EmbeddingsRequestLimits } = {},
): Hono {
  const app = new Hono();
  postJson(app, '/v1/embeddings', createEmbeddingsEndpoint(service, options.limits));
  const models = modelList(service.id, new Date());
  app.get('/v1/models', (c) => c.json(models));
  const health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
  getNode(
    app,
    '/healthz',
    toNodeHandler(() => health.liveness()),
  );
  getNode(
    app,
    '/readyz',
    toNodeHandler(() => health.readiness()),
  );
  const registry = new Registry();
  for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
  getNode(app, '/metrics', metricsHandler(registry));
  app.notFound((c) => errorResponse(c, noEmbeddingsRoute(c.req.method, c.req.path)));
  app.onError(batchErrorHandler());
  return app;
}

/**
 * Listens with {@link createEmbeddingsApp} at once; `shutdown` stops accepting, drains the batcher, waits for the
 * responses, then closes the model.
 *
 * @example
 * ```ts
 * const running = await startEmbeddingsApp(model, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startEmbeddingsApp(service: EmbeddingService, where: ListenOptions): Promise<RunningServer> {
  return startServer(nodeListener(createEmbeddingsApp(service)), where, service);
}
