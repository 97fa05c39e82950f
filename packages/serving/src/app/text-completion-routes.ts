// The text-completion app's routes, the same on Express, Koa, Fastify, Hono and Nest: one table (method, path,
// handler), the handlers made once per app, so that a route added here is served by every framework, and a request
// on a known path with another method gets the same 405 (with `Allow`) on all of them, anything else the same 404.
import type { HttpErrorOptions } from '@microbatch/core/http';
import type { BatchError } from '@microbatch/core';
import {
  createGenerationMetrics,
  createHealth,
  dashboardHandler,
  metricsHandler,
  toNodeHandler,
} from '@microbatch/prometheus';
import { Registry } from 'prom-client';
import { type TextCompletionAppOptions, accessOptions, httpErrorOptions } from './app-options.js';
import { batchOwner } from '../auth/principal.js';
import {
  type AppHandlers,
  type AppRoute,
  type RouteRow,
  allowedMethods,
  jsonRoute,
  jsonValueRoute,
  nodeRoute,
  resolveRoutes,
  rawRoutes,
  textQueryRoute,
  unmatchedTableRoute,
} from './route-table.js';
import { BATCH_API_TABLE, batchApiHandlers } from '../batch-api/batch-api-routes.js';
import { createTextCompletionBatchApi } from '../batch-api/batch-api.js';
import { createChatCompletionsEndpoint } from '../endpoints/chat-endpoint.js';
import { createCompletionsEndpoint } from '../endpoints/completions-endpoint.js';
import { modelList } from '../openai/model-list.js';
import { instrumentTextCompletionService } from '../service/service-metrics.js';
import type { TextCompletionService } from '../service/text-completion-service.js';
import { createTextQueryHandler } from '../endpoints/text-query-route.js';

/**
 * The text-completion app's route table: method, path and the handler that answers (see
 * {@link textCompletionHandlers}). `GET` routes answer `HEAD` too.
 *
 * @example
 * ```ts
 * TEXT_COMPLETION_TABLE.find((row) => row.path === '/metrics')?.handler; // 'metrics'
 * ```
 */
export const TEXT_COMPLETION_TABLE = [
  // The tutorial's curl: `curl "http://127.0.0.1:8000/?text=Once+upon+a+time"` prints the story, as plain text.
  { method: 'GET', path: '/', handler: 'textQuery' },
  // OpenAI's APIs (JSON or `stream: true`), so existing OpenAI clients work unchanged.
  { method: 'POST', path: '/v1/completions', handler: 'completions' },
  { method: 'POST', path: '/v1/chat/completions', handler: 'chatCompletions' },
  // What `client.models.list()` of the official OpenAI clients reads.
  { method: 'GET', path: '/v1/models', handler: 'models' },
  // Liveness always 200; readiness 503 while the model loads and once the server drains.
  { method: 'GET', path: '/healthz', handler: 'liveness' },
  { method: 'GET', path: '/readyz', handler: 'readiness' },
  // Prometheus metrics of the service's batchers and decode loop, and a live page of the same figures.
  { method: 'GET', path: '/metrics', handler: 'metrics' },
  { method: 'GET', path: '/dashboard', handler: 'dashboard' },
  // OpenAI's Files and Batch APIs (with `batchApi` / `--data-dir`; else each answers 404 saying so).
  ...BATCH_API_TABLE,
] as const satisfies readonly RouteRow[];

/**
 * Path → the methods the text-completion app answers there (HEAD as GET, without a body).
 *
 * @example
 * ```ts
 * TEXT_COMPLETION_ROUTES['/v1/completions']; // ['POST']
 * ```
 */
export const TEXT_COMPLETION_ROUTES: Readonly<Record<string, readonly string[]>> =
  allowedMethods(TEXT_COMPLETION_TABLE);

/**
 * The handlers of {@link TEXT_COMPLETION_TABLE} over one service, and who may reach them: one registry for the
 * metrics and the dashboard, every route through the service's own batchers, errors mapped with the options'
 * `exposeDetails`.
 *
 * @example
 * ```ts
 * const { liveness } = textCompletionHandlers(model).handlers;
 * ```
 */
export function textCompletionHandlers(
  service: TextCompletionService,
  options: TextCompletionAppOptions = {},
): AppHandlers<(typeof TEXT_COMPLETION_TABLE)[number]['handler']> {
  const errors = httpErrorOptions(options);
  const { apiKeys, protectMetrics, clientKey } = accessOptions(options);
  const registry = new Registry();
  const generation = createGenerationMetrics({ model: service.id, registry });
  const health = createHealth({
    batchers: service.batchers,
    ready: () => service.isReady(),
    ...(options.readiness === undefined ? {} : { mode: options.readiness }),
  });
  instrumentTextCompletionService(service, registry);
  // Both generating endpoints alike: one fairness key, the same generation metrics, the same error mapping.
  const endpoint = { clientKey, generation, sharedPrefixCache: options.sharedPrefixCache ?? false, ...errors };
  const handlers = {
    textQuery: textQueryRoute(createTextQueryHandler(service, clientKey, errors, options.sharedPrefixCache ?? false)),
    completions: jsonRoute(createCompletionsEndpoint(service, { ...endpoint, limits: options.limits ?? {} })),
    chatCompletions: jsonRoute(
      createChatCompletionsEndpoint(service, { ...endpoint, limits: options.chatLimits ?? {} }),
    ),
    models: jsonValueRoute(modelList(service.id, new Date())),
    liveness: nodeRoute(toNodeHandler(() => health.liveness())),
    readiness: nodeRoute(toNodeHandler(() => health.readiness())),
    metrics: nodeRoute(metricsHandler(registry)),
    dashboard: nodeRoute(dashboardHandler({ registry, title: `microbatch · ${service.id}` })),
    ...batchApiRoutes(service, options, errors),
  };
  return { handlers, access: { apiKeys, protectMetrics, registry } };
}

/**
 * The text-completion app's routes over one service, in table order, for a framework's `mountRoutes`.
 *
 * @example
 * ```ts
 * mountRoutes(textCompletionRoutes(model, options), expressMounts(app));
 * ```
 */
export function textCompletionRoutes(
  service: TextCompletionService,
  options: TextCompletionAppOptions = {},
): AppRoute[] {
  return resolveRoutes(TEXT_COMPLETION_TABLE, textCompletionHandlers(service, options));
}

/**
 * The error for a request none of the app's routes matched: 405 with `Allow` on a known path, else 404.
 *
 * @example
 * ```ts
 * app.use((req, res) => writeHttpError(res, noRoute(req.method, req.path)));
 * ```
 */
export function noRoute(method: string, path: string): BatchError<'NOT_FOUND' | 'METHOD_NOT_ALLOWED'> {
  return unmatchedTableRoute(method, path, TEXT_COMPLETION_ROUTES);
}

/**
 * The request's path as sent, as Express's `req.path` and Koa's `ctx.path` read it: not resolved the way `new URL()`
 * would (`/v1/../healthz` is not `/healthz`, and `//healthz` is not a host named `healthz`), so that an unmatched
 * path gets the same 404 on every framework (Nest and Hono route the resolved URL).
 *
 * @example
 * ```ts
 * requestPath('/v1/../healthz?x=1'); // '/v1/../healthz'
 * ```
 */
export function requestPath(url: string | undefined): string {
  const path = (url ?? '/').split('?', 1)[0] ?? '/';
  return path === '' ? '/' : path;
}

/** The Files and Batch APIs' handlers over `service` (each a 404 saying how to turn them on when `batchApi` is absent). */
function batchApiRoutes(service: TextCompletionService, options: TextCompletionAppOptions, errors: HttpErrorOptions) {
  const api =
    options.batchApi === undefined
      ? undefined
      : createTextCompletionBatchApi(
          service,
          { principal: batchOwner, ...options.batchApi },
          { limits: options.limits, chatLimits: options.chatLimits },
          errors,
        );
  return rawRoutes(batchApiHandlers(api, errors));
}
