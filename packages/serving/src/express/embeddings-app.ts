// OpenAI's embeddings API on Express: every input of every request is one batched item costing its tokens.
import { writeHttpError, writeJson } from '@microbatch/core/http';
import { batchErrorHandler, jsonBody } from '@microbatch/express';
import { createHealth, instrumentBatcher, metricsHandler, toNodeHandler } from '@microbatch/prometheus';
import express from 'express';
import { Registry } from 'prom-client';
import type { EmbeddingService } from '../embedding-model.js';
import { createEmbeddingsEndpoint } from '../embeddings-endpoint.js';
import type { EmbeddingsRequestLimits } from '../embeddings-request.js';
import { noEmbeddingsRoute } from '../embeddings-routes.js';
import { modelList } from '../models-endpoint.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';

/**
 * The embeddings routes on Express: `POST /v1/embeddings`, `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`.
 *
 * @example
 * ```ts
 * createEmbeddingsApp(createEmbeddingModel({ model: 'models/all-MiniLM-L6-v2' })).listen(8000);
 * ```
 */
export function createEmbeddingsApp(
  service: EmbeddingService,
  options: { readonly limits?: EmbeddingsRequestLimits } = {},
): express.Express {
  const app = express();
  app.disable('x-powered-by');
  const embeddings = createEmbeddingsEndpoint(service, options.limits);
  app.post('/v1/embeddings', jsonBody(), (req, res) => embeddings(req.body, res));
  const models = modelList(service.id, new Date());
  app.get('/v1/models', (_req, res) => writeJson(res, 200, models));
  const health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
  app.get(
    '/healthz',
    toNodeHandler(() => health.liveness()),
  );
  app.get(
    '/readyz',
    toNodeHandler(() => health.readiness()),
  );
  const registry = new Registry();
  for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
  app.get('/metrics', metricsHandler(registry));
  app.use((req, res) => writeHttpError(res, noEmbeddingsRoute(req.method, req.path)));
  app.use(batchErrorHandler());
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
  return startServer(createEmbeddingsApp(service), where, service);
}
