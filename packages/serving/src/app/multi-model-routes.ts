// The multi-model app's routes, the same on Express, Koa, Fastify and Hono: every OpenAI endpoint (and the encoder
// ones: rerank, score, classify) routes by the body's `model` to a model of a `ModelRegistry` (unknown: 404 `model_not_found`; another task's: 400 naming both),
// waiting while that model loads; `/v1/models` lists every model with its task and whether it is loaded.
import type { ServerResponse } from 'node:http';
import { unmatchedRoute, writeJson } from '@microbatch/core/http';
import { BatchError } from '@microbatch/core';
import { dashboardHandler, metricsHandler, toNodeHandler } from '@microbatch/prometheus';
import {
  type EmbeddingsAppOptions,
  type TextCompletionAppOptions,
  accessOptions,
  httpErrorOptions,
} from './app-options.js';
import {
  type AppHandlers,
  type AppRoute,
  type NoRoute,
  type RouteRow,
  allowedMethods,
  jsonRoute,
  nodeRoute,
  resolveRoutes,
} from './route-table.js';
import type { NodeJsonEndpoint } from '../endpoints/openai-endpoint.js';
import type { EncoderRequestLimits } from '../openai/encoder-fields.js';
import { writeOpenAiError } from '../openai/openai-error.js';
import type { ModelLease, ModelRegistry, ModelService } from '../registry/model-registry.js';
import {
  MODEL_ENDPOINTS,
  MODEL_TASKS,
  type ModelEndpointName,
  type ModelTask,
  type ModelTaskRow,
  tasksServing,
} from '../registry/model-tasks.js';

/**
 * Options of the multi-model apps: the text-completion and embeddings apps' options, each applied to the models of
 * its task (`readiness` aside: ready means every eager model loaded).
 *
 * @example
 * ```ts
 * createMultiModelApp(registry, { exposeDetails: true, embeddingsLimits: { maxInputs: 64 } });
 * ```
 */
export interface MultiModelAppOptions extends Omit<TextCompletionAppOptions, 'readiness' | 'batchApi'> {
  /** Bounds of `POST /v1/embeddings` requests beyond the model's own. */
  readonly embeddingsLimits?: EmbeddingsAppOptions['limits'];
  /**
   * Bounds of `POST /v1/rerank`, `/rerank`, `/v1/score` and `/classify` requests beyond the model's own.
   * @default `maxDocuments` 1000 or each model's `maxQueueSize` when smaller
   */
  readonly encoderLimits?: EncoderRequestLimits;
}

/**
 * The multi-model app's route table. `GET` routes answer `HEAD` too.
 *
 * @example
 * ```ts
 * MULTI_MODEL_TABLE[0].path; // '/v1/completions'
 * ```
 */
export const MULTI_MODEL_TABLE = [
  { method: 'POST', path: MODEL_ENDPOINTS.completions, handler: 'completions' },
  { method: 'POST', path: MODEL_ENDPOINTS.chatCompletions, handler: 'chatCompletions' },
  { method: 'POST', path: MODEL_ENDPOINTS.embeddings, handler: 'embeddings' },
  { method: 'POST', path: MODEL_ENDPOINTS.rerank, handler: 'rerank' },
  { method: 'POST', path: '/rerank', handler: 'rerank' },
  { method: 'POST', path: MODEL_ENDPOINTS.score, handler: 'score' },
  { method: 'POST', path: MODEL_ENDPOINTS.classify, handler: 'classify' },
  { method: 'GET', path: '/v1/models', handler: 'models' },
  { method: 'GET', path: '/healthz', handler: 'liveness' },
  { method: 'GET', path: '/readyz', handler: 'readiness' },
  { method: 'GET', path: '/metrics', handler: 'metrics' },
  { method: 'GET', path: '/dashboard', handler: 'dashboard' },
] as const satisfies readonly RouteRow[];

/**
 * Path → the methods the multi-model app answers there (HEAD as GET).
 *
 * @example
 * ```ts
 * MULTI_MODEL_ROUTES["/v1/embeddings"]; // ["POST"]
 * ```
 */
export const MULTI_MODEL_ROUTES: Readonly<Record<string, readonly string[]>> = allowedMethods(MULTI_MODEL_TABLE);

/**
 * The error for a request no route of the multi-model app matched: 405 with `Allow` on a known path, else 404.
 *
 * @example
 * ```ts
 * noMultiModelRoute('GET', '/v1/embeddings').code; // 'METHOD_NOT_ALLOWED'
 * ```
 */
export const noMultiModelRoute: NoRoute = (method, path) => unmatchedRoute(method, path, MULTI_MODEL_ROUTES);

/** A name as it may be quoted back: bounded, so a huge `model` is not echoed whole. */
const quoted = (name: string): string => JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}...` : name);

/** OpenAI's answer for a model it does not have. */
function writeModelNotFound(res: ServerResponse, name: string): void {
  writeJson(res, 404, {
    error: {
      message: `The model ${quoted(name)} does not exist`,
      type: 'invalid_request_error',
      param: 'model',
      code: 'model_not_found',
    },
  });
}

/**
 * The body's `model`: a string, or, when absent, the first model (in the registry's order) of a task the endpoint
 * serves, as a one-model server answers whatever `model` says; `undefined` after answering the 400.
 */
function modelOf(
  body: unknown,
  registry: ModelRegistry,
  serving: readonly ModelTask[],
  res: ServerResponse,
): string | undefined {
  const model = typeof body === 'object' && body !== null ? (body as { model?: unknown }).model : undefined;
  if (typeof model === 'string') return model;
  const fallback = registry.models().find((entry) => serving.includes(entry.task));
  if (model === undefined && fallback !== undefined) return fallback.name;
  const message =
    model === undefined
      ? `\`model\` is required: no model of this server serves ${serving.join(' or ')} (GET /v1/models lists them)`
      : '`model` must be a string';
  writeOpenAiError(res, new BatchError('INVALID_INPUT', message, { details: { field: 'model' } }));
  return undefined;
}

/**
 * The handlers of {@link MULTI_MODEL_TABLE} over a registry, and who may reach them.
 *
 * @example
 * ```ts
 * const { models } = multiModelHandlers(registry).handlers;
 * ```
 */
export function multiModelHandlers(
  registry: ModelRegistry,
  options: MultiModelAppOptions = {},
): AppHandlers<(typeof MULTI_MODEL_TABLE)[number]['handler']> {
  const errors = httpErrorOptions(options);
  const { apiKeys, protectMetrics, clientKey } = accessOptions(options);
  const servingSince = Math.floor(Date.now() / 1_000);
  // A loaded service's endpoints, made at its first request and dropped with it (a reload makes new ones).
  const made = new WeakMap<ModelService, Partial<Record<ModelEndpointName, NodeJsonEndpoint>>>();
  const endpointsOf = (lease: ModelLease) => {
    let endpoints = made.get(lease.service);
    if (endpoints === undefined) {
      const row = MODEL_TASKS[lease.task] as ModelTaskRow<ModelService>;
      endpoints = row.makeEndpoints(lease.service, lease.metrics, {
        clientKey,
        sharedPrefixCache: options.sharedPrefixCache ?? false,
        exposeDetails: errors.exposeDetails ?? false,
        limits: options.limits,
        chatLimits: options.chatLimits,
        embeddingsLimits: options.embeddingsLimits,
        encoderLimits: options.encoderLimits,
      });
      made.set(lease.service, endpoints);
    }
    return endpoints;
  };
  const routed = (endpoint: ModelEndpointName): NodeJsonEndpoint => {
    const serving = tasksServing(endpoint);
    return async (body, res) => {
      const name = modelOf(body, registry, serving, res);
      if (name === undefined) return;
      const model = registry.find(name);
      if (model === undefined) {
        writeModelNotFound(res, name);
        return;
      }
      if (!serving.includes(model.task)) {
        const message =
          `The model ${quoted(name)} is a ${model.task} model; ${MODEL_ENDPOINTS[endpoint]} serves ` +
          `${serving.join(' or ')} models`;
        writeOpenAiError(res, new BatchError('INVALID_INPUT', message, { details: { field: 'model' } }));
        return;
      }
      // A client gone while its model loads stops waiting.
      const gone = new AbortController();
      const onClose = () => gone.abort();
      res.once('close', onClose);
      let lease: ModelLease;
      try {
        lease = await registry.acquire(name, gone.signal);
      } catch (error) {
        if (!res.destroyed) writeOpenAiError(res, error, errors);
        return;
      } finally {
        res.off('close', onClose);
      }
      try {
        let answer: NodeJsonEndpoint;
        try {
          answer = endpointsOf(lease)[endpoint] as NodeJsonEndpoint;
        } catch (error) {
          // Options the loaded model refuses (`encoderLimits.maxDocuments` past its queue): its requests get a 500
          // without the message; the endpoints are made again at the next request, so the refusal repeats.
          writeOpenAiError(res, error, errors);
          return;
        }
        await answer(body, res);
      } finally {
        lease.release();
      }
    };
  };
  const modelList = async () => ({
    status: 200,
    body: {
      object: 'list',
      data: registry.models().map((model) => ({
        id: model.name,
        object: 'model',
        created: servingSince,
        owned_by: 'microbatch',
        task: model.task,
        load: model.load,
        loaded: model.state === 'loaded',
        state: model.state,
      })),
    },
  });
  const readiness = async () => {
    const reasons = await registry.unready();
    return reasons.length === 0
      ? { status: 200, body: { status: 'ok' } }
      : { status: 503, body: { status: 'unavailable', reasons } };
  };
  const handlers = {
    completions: jsonRoute(routed('completions')),
    chatCompletions: jsonRoute(routed('chatCompletions')),
    embeddings: jsonRoute(routed('embeddings')),
    rerank: jsonRoute(routed('rerank')),
    score: jsonRoute(routed('score')),
    classify: jsonRoute(routed('classify')),
    models: nodeRoute(toNodeHandler(modelList)),
    liveness: nodeRoute(toNodeHandler(() => ({ status: 200, body: { status: 'ok' } }))),
    readiness: nodeRoute(toNodeHandler(readiness)),
    metrics: nodeRoute(metricsHandler(registry.metrics)),
    dashboard: nodeRoute(dashboardHandler({ registry: registry.metrics, title: 'microbatch · models' })),
  };
  return { handlers, access: { apiKeys, protectMetrics, registry: registry.metrics } };
}

/**
 * The multi-model app's routes over a registry, in table order, for a framework's `mountRoutes`.
 *
 * @example
 * ```ts
 * expressApp(multiModelRoutes(registry), noMultiModelRoute);
 * ```
 */
export function multiModelRoutes(registry: ModelRegistry, options: MultiModelAppOptions = {}): AppRoute[] {
  return resolveRoutes(MULTI_MODEL_TABLE, multiModelHandlers(registry, options));
}
