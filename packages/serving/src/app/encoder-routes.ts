// The encoder apps' routes, the same on Express, Koa, Fastify, Hono and Nest: one table per task over one
// `ClassifierService` (rerank: `POST /v1/rerank`, `/rerank`, `/v1/score`; text-classification: `POST /classify`),
// beside the model list, probes and metrics, with the same 405 / 404 for what none answers.
import type { BatchError } from '@microbatch/core';
import { unmatchedRoute } from '@microbatch/core/http';
import { createHealth, instrumentBatcher, metricsHandler, toNodeHandler } from '@microbatch/prometheus';
import { Registry } from 'prom-client';
import type { ApiKeyInput, ApiKeys } from '../auth/api-keys.js';
import type { ClientKey } from '../endpoints/client-key.js';
import {
  createClassifyEndpoint,
  createRerankEndpoint,
  createScoreEndpoint,
  documentLimits,
} from '../endpoints/encoder-endpoints.js';
import { modelList } from '../openai/model-list.js';
import type { EncoderRequestLimits } from '../openai/encoder-fields.js';
import type { ClassifierService, ClassifierTask } from '../service/classifier-service.js';
import { accessOptions, httpErrorOptions } from './app-options.js';
import {
  type AppHandlers,
  type AppRoute,
  type RouteRow,
  allowedMethods,
  jsonRoute,
  jsonValueRoute,
  nodeRoute,
  resolveRoutes,
} from './route-table.js';

/**
 * Options of the ready-made encoder apps (rerank, score, classify).
 *
 * @example
 * ```ts
 * startEncoderApp(reranker, { port: 8000 }, { limits: { maxDocuments: 100 } });
 * ```
 */
export interface EncoderAppOptions {
  /** Bounds of a request beyond the model's own (documents per request, characters per text). */
  readonly limits?: EncoderRequestLimits;
  /**
   * The API keys every route but the probes (and `/metrics` unless `protectMetrics`) requires, as
   * `Authorization: Bearer <key>` (401 in OpenAI's shape otherwise), as on the text-completion apps.
   * @default no keys: every request is served
   */
  readonly apiKeys?: ApiKeys | readonly ApiKeyInput[];
  /**
   * With `apiKeys`: whether `/metrics` requires a key too. Refused without `apiKeys`.
   * @default false
   */
  readonly protectMetrics?: boolean;
  /**
   * Who a request comes from, for fair shares of the queue and of each batch.
   * @default the API key's name with `apiKeys`, else the client's address
   */
  readonly clientKey?: ClientKey;
  /**
   * Whether a refusal (503) shows the engine's own message and `details`.
   * @default false
   */
  readonly exposeDetails?: boolean;
}

const COMMON = [
  { method: 'GET', path: '/v1/models', handler: 'models' },
  { method: 'GET', path: '/healthz', handler: 'liveness' },
  { method: 'GET', path: '/readyz', handler: 'readiness' },
  { method: 'GET', path: '/metrics', handler: 'metrics' },
] as const satisfies readonly RouteRow[];

/**
 * The route table of each encoder task: method, path and the handler that answers. `GET` routes answer `HEAD` too.
 *
 * @example
 * ```ts
 * ENCODER_TABLES.rerank[0]; // { method: 'POST', path: '/v1/rerank', handler: 'rerank' }
 * ```
 */
export const ENCODER_TABLES = {
  rerank: [
    { method: 'POST', path: '/v1/rerank', handler: 'rerank' },
    { method: 'POST', path: '/rerank', handler: 'rerank' },
    { method: 'POST', path: '/v1/score', handler: 'score' },
    ...COMMON,
  ],
  'text-classification': [{ method: 'POST', path: '/classify', handler: 'classify' }, ...COMMON],
} as const satisfies Readonly<Record<ClassifierTask, readonly RouteRow[]>>;

/**
 * Path → the methods each encoder task's app answers there (HEAD as GET).
 *
 * @example
 * ```ts
 * ENCODER_ROUTES.rerank['/rerank']; // ['POST']
 * ```
 */
export const ENCODER_ROUTES: Readonly<Record<ClassifierTask, Readonly<Record<string, readonly string[]>>>> = {
  rerank: allowedMethods(ENCODER_TABLES.rerank),
  'text-classification': allowedMethods(ENCODER_TABLES['text-classification']),
};

/** The POST paths of each task's table (where a JSON body is read). */
export const ENCODER_POST_PATHS: Readonly<Record<ClassifierTask, readonly string[]>> = {
  rerank: ENCODER_TABLES.rerank.filter((row) => row.method === 'POST').map((row) => row.path),
  'text-classification': ['/classify'],
};

/**
 * The handlers of the service's task table, and who may reach them: each request's texts or pairs one all-or-none
 * group of batched items costing their tokens; errors mapped with the options' `exposeDetails`.
 *
 * @example
 * ```ts
 * const { rerank } = encoderHandlers(reranker).handlers;
 * ```
 */
export function encoderHandlers(service: ClassifierService, options: EncoderAppOptions = {}): AppHandlers {
  const errors = httpErrorOptions(options);
  const health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
  const registry = new Registry();
  for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
  const { apiKeys, protectMetrics, clientKey } = accessOptions(options);
  const endpoint = { ...errors, limits: documentLimits(service, options.limits ?? {}), clientKey };
  const handlers = {
    models: jsonValueRoute(modelList(service.id, new Date())),
    liveness: nodeRoute(toNodeHandler(() => health.liveness())),
    readiness: nodeRoute(toNodeHandler(() => health.readiness())),
    metrics: nodeRoute(metricsHandler(registry)),
    // Made only for the task that serves them: a classifier has no rerank route, a reranker no classify route.
    ...(service.task === 'rerank'
      ? {
          rerank: jsonRoute(createRerankEndpoint(service, endpoint)),
          score: jsonRoute(createScoreEndpoint(service, endpoint)),
        }
      : { classify: jsonRoute(createClassifyEndpoint(service, endpoint)) }),
  };
  return { handlers, access: { apiKeys, protectMetrics, registry } };
}

/**
 * The encoder app's routes over one service (its task's table, in order), for a framework's `mountRoutes`.
 *
 * @example
 * ```ts
 * mountRoutes(encoderRoutes(reranker), expressMounts(app));
 * ```
 */
export function encoderRoutes(service: ClassifierService, options: EncoderAppOptions = {}): AppRoute[] {
  return resolveRoutes<string>(ENCODER_TABLES[service.task], encoderHandlers(service, options));
}

/**
 * The error for a request no route of a task's encoder app matched: 405 with `Allow` on a known path, else 404.
 *
 * @example
 * ```ts
 * app.use((req, res) => writeHttpError(res, noEncoderRoute('rerank')(req.method, req.path)));
 * ```
 */
export function noEncoderRoute(
  task: ClassifierTask,
): (method: string, path: string) => BatchError<'NOT_FOUND' | 'METHOD_NOT_ALLOWED'> {
  const routes = ENCODER_ROUTES[task];
  return (method, path) => unmatchedRoute(method, path, routes);
}
