// Several models behind one Koa app, each request routed by its `model` (see `../multi-model-routes.ts`).
import type Koa from 'koa';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import { koaApp } from './mounts.js';
import { type MultiModelAppOptions, multiModelRoutes, noMultiModelRoute } from '../multi-model-routes.js';
import type { ModelRegistry } from '../../registry/model-registry.js';

/**
 * The multi-model routes on Koa: `POST /v1/completions`, `/v1/chat/completions`, `/v1/embeddings` (and the
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
export function createMultiModelApp(registry: ModelRegistry, options: MultiModelAppOptions = {}): Koa {
  return koaApp(multiModelRoutes(registry, options), noMultiModelRoute);
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
  const callback = createMultiModelApp(registry, options).callback();
  // Koa answers its own errors (`ctx.onerror`): the promise its callback returns never rejects.
  return startServer((req, res) => void callback(req, res), where, registry);
}
