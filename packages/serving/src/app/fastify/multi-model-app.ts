// Several models behind one Fastify app, each request routed by its `model` (see `../multi-model-routes.ts`).
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { ListenOptions, RunningServer } from '../serve.js';
import { createFastifyApp, startFastify } from './node-routes.js';
import { type MultiModelAppOptions, multiModelRoutes, noMultiModelRoute } from '../multi-model-routes.js';
import type { ModelRegistry } from '../../registry/model-registry.js';

/**
 * The multi-model routes on Fastify: `POST /v1/completions`, `/v1/chat/completions`, `/v1/embeddings` (and the
 * encoder routes `/v1/rerank`, `/rerank`, `/v1/score`, `/classify`) routed by the body's `model`,
 * `GET /v1/models` (every model, loaded or not), `/healthz`, `/readyz` (the eager models
 * loaded), `/metrics` (labelled `model`), `/dashboard`.
 *
 * @example
 * ```ts
 * const registry = createModelRegistry([chat, embedder]);
 * const app = createMultiModelApp(registry);
 * ```
 */
export function createMultiModelApp(
  registry: ModelRegistry,
  options: MultiModelAppOptions = {},
  fastifyOptions: FastifyServerOptions = {},
): FastifyInstance {
  return createFastifyApp(multiModelRoutes(registry, options), noMultiModelRoute, fastifyOptions);
}

/**
 * Listens with {@link createMultiModelApp} at once (readiness says when the eager models are loaded); `shutdown`
 * stops accepting, drains every loaded model's batchers, waits for the responses, then closes every model.
 *
 * @example
 * ```ts
 * const running = await startMultiModelApp(registry, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startMultiModelApp(
  registry: ModelRegistry,
  where: ListenOptions,
  options: MultiModelAppOptions = {},
): Promise<RunningServer> {
  return startFastify((fastifyOptions) => createMultiModelApp(registry, options, fastifyOptions), where, registry);
}
