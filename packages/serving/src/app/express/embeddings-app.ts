// OpenAI's embeddings API on Express: every input of every request is one batched item costing its tokens.
import type express from 'express';
import type { EmbeddingsAppOptions } from '../app-options.js';
import type { EmbeddingService } from '../../service/embedding-service.js';
import { embeddingsRoutes, noEmbeddingsRoute } from '../embeddings-routes.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import { expressApp } from './mounts.js';

/**
 * The embeddings routes on Express: `POST /v1/embeddings`, `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`.
 *
 * @example
 * ```ts
 * createEmbeddingsApp(createEmbeddingModel({ model: 'models/all-MiniLM-L6-v2' })).listen(8000);
 * ```
 */
export function createEmbeddingsApp(service: EmbeddingService, options: EmbeddingsAppOptions = {}): express.Express {
  return expressApp(embeddingsRoutes(service, options), noEmbeddingsRoute);
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
  return startServer(createEmbeddingsApp(service, options), where, service);
}
