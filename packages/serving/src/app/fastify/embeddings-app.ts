// OpenAI's embeddings API on Fastify: every input of every request is one batched item costing its tokens.
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { EmbeddingsAppOptions } from '../app-options.js';
import type { EmbeddingService } from '../../service/embedding-service.js';
import { embeddingsRoutes, noEmbeddingsRoute } from '../embeddings-routes.js';
import type { ListenOptions, RunningServer } from '../serve.js';
import { createFastifyApp, startFastify } from './node-routes.js';

/**
 * The embeddings routes on Fastify: `POST /v1/embeddings`, `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`;
 * another method on these paths is a JSON 405 with `Allow`, anything else a JSON 404.
 *
 * @example
 * ```ts
 * await createEmbeddingsApp(createEmbeddingModel({ model: 'models/all-MiniLM-L6-v2' })).listen({ port: 8000 });
 * ```
 */
export function createEmbeddingsApp(
  service: EmbeddingService,
  options: EmbeddingsAppOptions = {},
  fastifyOptions: FastifyServerOptions = {},
): FastifyInstance {
  return createFastifyApp(embeddingsRoutes(service, options), noEmbeddingsRoute, fastifyOptions);
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
  return startFastify((fastifyOptions) => createEmbeddingsApp(service, options, fastifyOptions), where, service);
}
