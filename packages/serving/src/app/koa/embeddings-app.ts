// OpenAI's embeddings API on Koa: every input of every request is one batched item costing its tokens.
import type Koa from 'koa';
import type { EmbeddingsAppOptions } from '../app-options.js';
import type { EmbeddingService } from '../../service/embedding-service.js';
import { embeddingsRoutes, noEmbeddingsRoute } from '../embeddings-routes.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import { koaApp } from './mounts.js';

/**
 * The embeddings routes on Koa: `POST /v1/embeddings`, `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`.
 *
 * @example
 * ```ts
 * createEmbeddingsApp(createEmbeddingModel({ model: 'models/all-MiniLM-L6-v2' })).listen(8000);
 * ```
 */
export function createEmbeddingsApp(service: EmbeddingService, options: EmbeddingsAppOptions = {}): Koa {
  return koaApp(embeddingsRoutes(service, options), noEmbeddingsRoute);
}

/**
 * Listens with {@link createEmbeddingsApp} at once; `shutdown` drains the batcher and closes the model.
 *
 * @example
 * ```ts
 * const running = await startEmbeddingsApp(model, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startEmbeddingsApp(
  service: EmbeddingService,
  where: ListenOptions,
  options: EmbeddingsAppOptions = {},
): Promise<RunningServer> {
  const callback = createEmbeddingsApp(service, options).callback();
  return startServer((req, res) => void callback(req, res), where, service);
}
