// OpenAI's embeddings API on Hono (served by `@hono/node-server`): every input of every request is one batched item
// costing its tokens.
import type { Hono } from 'hono';
import type { EmbeddingsAppOptions } from '../app-options.js';
import type { EmbeddingService } from '../../service/embedding-service.js';
import { embeddingsRoutes, noEmbeddingsRoute } from '../embeddings-routes.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import { honoApp, nodeListener } from './node-routes.js';

/**
 * The embeddings routes on Hono: `POST /v1/embeddings`, `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`. Serve
 * it with `@hono/node-server` (the endpoint writes the Node response).
 *
 * @example
 * ```ts
 * serve({ fetch: createEmbeddingsApp(createEmbeddingModel({ model: 'models/all-MiniLM-L6-v2' })).fetch, port: 8000 });
 * ```
 */
export function createEmbeddingsApp(service: EmbeddingService, options: EmbeddingsAppOptions = {}): Hono {
  return honoApp(embeddingsRoutes(service, options), noEmbeddingsRoute);
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
export function startEmbeddingsApp(
  service: EmbeddingService,
  where: ListenOptions,
  options: EmbeddingsAppOptions = {},
): Promise<RunningServer> {
  return startServer(nodeListener(createEmbeddingsApp(service, options)), where, service);
}
