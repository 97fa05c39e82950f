// The embeddings app's routes, the same on Express, Koa, Fastify, Hono and Nest: one table (method, path, handler),
// so a route added here is served by every framework, with the same 405 / 404 for what none answers.
import type { BatchError } from '@microbatch/core';
import { createHealth, instrumentBatcher, metricsHandler, toNodeHandler } from '@microbatch/prometheus';
import { Registry } from 'prom-client';
import { type EmbeddingsAppOptions, accessOptions, httpErrorOptions } from './app-options.js';
import { batchOwner } from '../auth/principal.js';
import {
  type AppHandlers,
  type AppRoute,
  type RouteRow,
  allowedMethods,
  jsonRoute,
  jsonValueRoute,
  nodeRoute,
  rawRoutes,
  resolveRoutes,
  unmatchedTableRoute,
} from './route-table.js';
import { BATCH_API_TABLE, batchApiHandlers } from '../batch-api/batch-api-routes.js';
import { createEmbeddingsBatchApi } from '../batch-api/batch-api.js';
import type { EmbeddingService } from '../service/embedding-service.js';
import { createEmbeddingsEndpoint } from '../endpoints/embeddings-endpoint.js';
import { modelList } from '../openai/model-list.js';

/**
 * The embeddings app's route table: method, path and the handler that answers. `GET` routes answer `HEAD` too.
 *
 * @example
 * ```ts
 * EMBEDDINGS_TABLE[0]; // { method: 'POST', path: '/v1/embeddings', handler: 'embeddings' }
 * ```
 */
export const EMBEDDINGS_TABLE = [
  { method: 'POST', path: '/v1/embeddings', handler: 'embeddings' },
  { method: 'GET', path: '/v1/models', handler: 'models' },
  { method: 'GET', path: '/healthz', handler: 'liveness' },
  { method: 'GET', path: '/readyz', handler: 'readiness' },
  { method: 'GET', path: '/metrics', handler: 'metrics' },
  // OpenAI's Files and Batch APIs (with `batchApi` / `--data-dir`; else each answers 404 saying so).
  ...BATCH_API_TABLE,
] as const satisfies readonly RouteRow[];

/**
 * Path → the methods the embeddings app answers there (HEAD as GET).
 *
 * @example
 * ```ts
 * EMBEDDINGS_ROUTES['/v1/embeddings']; // ['POST']
 * ```
 */
export const EMBEDDINGS_ROUTES: Readonly<Record<string, readonly string[]>> = allowedMethods(EMBEDDINGS_TABLE);

/**
 * The handlers of {@link EMBEDDINGS_TABLE} over one model, and who may reach them: every input of every request is
 * one batched item costing its tokens; errors mapped with the options' `exposeDetails`.
 *
 * @example
 * ```ts
 * const { embeddings } = embeddingsHandlers(model).handlers;
 * ```
 */
export function embeddingsHandlers(
  service: EmbeddingService,
  options: EmbeddingsAppOptions = {},
): AppHandlers<(typeof EMBEDDINGS_TABLE)[number]['handler']> {
  const errors = httpErrorOptions(options);
  const { apiKeys, protectMetrics, clientKey } = accessOptions(options);
  const health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
  const registry = new Registry();
  for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
  const handlers = {
    embeddings: jsonRoute(
      createEmbeddingsEndpoint(service, {
        ...errors,
        limits: options.limits ?? {},
        clientKey,
      }),
    ),
    models: jsonValueRoute(modelList(service.id, new Date())),
    liveness: nodeRoute(toNodeHandler(() => health.liveness())),
    readiness: nodeRoute(toNodeHandler(() => health.readiness())),
    metrics: nodeRoute(metricsHandler(registry)),
    ...rawRoutes(
      batchApiHandlers(
        options.batchApi === undefined
          ? undefined
          : createEmbeddingsBatchApi(
              service,
              { principal: batchOwner, ...options.batchApi },
              options.limits ?? {},
              errors,
            ),
        errors,
      ),
    ),
  };
  return { handlers, access: { apiKeys, protectMetrics, registry } };
}

/**
 * The embeddings app's routes over one model, in table order, for a framework's `mountRoutes`.
 *
 * @example
 * ```ts
 * mountRoutes(embeddingsRoutes(model), expressMounts(app));
 * ```
 */
export function embeddingsRoutes(service: EmbeddingService, options: EmbeddingsAppOptions = {}): AppRoute[] {
  return resolveRoutes(EMBEDDINGS_TABLE, embeddingsHandlers(service, options));
}

/**
 * The error for a request no route of the embeddings app matched: 405 with `Allow` on a known path, else 404.
 *
 * @example
 * ```ts
 * app.use((req, res) => writeHttpError(res, noEmbeddingsRoute(req.method, req.path)));
 * ```
 */
export function noEmbeddingsRoute(method: string, path: string): BatchError<'NOT_FOUND' | 'METHOD_NOT_ALLOWED'> {
  return unmatchedTableRoute(method, path, EMBEDDINGS_ROUTES);
}
