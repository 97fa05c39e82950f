// The Ray Serve text-generator tutorial as a Fastify app, with the OpenAI completions API, health probes and
// Prometheus metrics. Every route shares ONE service: concurrent requests coalesce into one model call.
import { batchRoute } from '@microbatch/fastify';
import {
  createGenerationMetrics,
  createHealth,
  dashboardHandler,
  metricsHandler,
  toNodeHandler,
} from '@microbatch/prometheus';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { Registry } from 'prom-client';
import type { TextCompletionAppOptions } from '../app-options.js';
import { createChatCompletionsEndpoint } from '../chat-endpoint.js';
import { fairnessKeyOf } from '../client-key.js';
import { decodeBatchHeaders } from '../completion-response.js';
import { createCompletionsEndpoint } from '../completions-endpoint.js';
import { noRoute } from '../routes.js';
import { instrumentTextCompletionService } from '../service-metrics.js';
import { modelList } from '../models-endpoint.js';
import type { ListenOptions, RunningServer } from '../serve.js';
import type { TextCompletionService } from '../text-completion-model.js';
import { parseTextQuery, textQueryAnswer } from '../text-query.js';
import { createFastifyApp, getNode, logFault, postJson, startFastify } from './node-routes.js';

/**
 * The text-completion routes on Fastify: `GET /?text=` (plain text), `POST /v1/completions` and
 * `POST /v1/chat/completions` (OpenAI, JSON or SSE), `GET /v1/models`, `GET /healthz`, `GET /readyz`, `GET /metrics`,
 * `GET /dashboard`; another method on these paths is a JSON 405 with
 * `Allow`, anything else a JSON 404. Bodies are read by `@microbatch/fastify`'s plugin within a 64 KiB `bodyLimit`.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k' });
 * await createTextCompletionApp(model).listen({ port: 8000 });
 * ```
 */
export function createTextCompletionApp(
  service: TextCompletionService,
  options: TextCompletionAppOptions = {},
  fastifyOptions: FastifyServerOptions = {},
): FastifyInstance {
  return createFastifyApp((scope) => routes(scope, service, options), noRoute, fastifyOptions);
}

function routes(app: FastifyInstance, service: TextCompletionService, options: TextCompletionAppOptions): void {
  // Fastify would answer HEAD with the GET route: never run the model for a response without a body.
  app.head('/', (_request, reply) => reply.type('text/plain').send());
  // The tutorial's curl: `curl "http://127.0.0.1:8000/?text=Once+upon+a+time"` prints the story, as plain text.
  app.get(
    '/',
    batchRoute({
      batcher: service.generate,
      input: (request) => parseTextQuery((request.query as { text?: unknown }).text, (body) => service.validate(body)),
      // Continuous scheduling: the decode loop's batch, not the batcher's single-request dispatch.
      output: (result, request, reply) =>
        reply
          .headers(decodeBatchHeaders([result]))
          .type('text/plain')
          .send(textQueryAnswer((request.query as { text?: unknown }).text, result)),
      // Each client (its address, or the app's `clientKey`) gets a fair share of admission and of each batch.
      callOptions: (request) => ({ fairnessKey: fairnessKeyOf(request.raw, options.clientKey) }),
      onError: logFault,
    }),
  );

  // OpenAI's APIs (JSON or `stream: true`), so existing OpenAI clients work unchanged.
  const registry = new Registry();
  const generation = createGenerationMetrics({ model: service.id, registry });
  postJson(app, '/v1/completions', createCompletionsEndpoint(service, options.limits, options.clientKey, generation));
  postJson(app, '/v1/chat/completions', createChatCompletionsEndpoint(service, undefined, options.clientKey));
  // What `client.models.list()` of the official OpenAI clients reads.
  const models = modelList(service.id, new Date());
  app.get('/v1/models', (_request, reply) => reply.send(models));

  // Liveness always 200; readiness 503 while the model loads and once the server drains.
  const health = createHealth({
    batchers: service.batchers,
    ready: () => service.isReady(),
    ...(options.readiness === undefined ? {} : { mode: options.readiness }),
  });
  getNode(
    app,
    '/healthz',
    toNodeHandler(() => health.liveness()),
  );
  getNode(
    app,
    '/readyz',
    toNodeHandler(() => health.readiness()),
  );

  // Prometheus metrics of both batchers, as the Express, Koa and Nest apps serve them.
  instrumentTextCompletionService(service, registry);
  getNode(app, '/metrics', metricsHandler(registry));
  // A live page of the same figures: batch sizes, queue, throughput, latency percentiles, refusals.
  getNode(app, '/dashboard', dashboardHandler({ registry, title: `microbatch · ${service.id}` }));
}

/**
 * Listens with {@link createTextCompletionApp} at once (readiness says when the service can serve); `shutdown`
 * stops accepting, drains the service's batchers, waits for the responses, then closes the service. The app is
 * served by the same Node server (timeouts, limits) as the other frameworks' apps.
 *
 * @example
 * ```ts
 * const running = await startTextCompletionApp(model, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startTextCompletionApp(
  service: TextCompletionService,
  where: ListenOptions,
  options: TextCompletionAppOptions = {},
): Promise<RunningServer> {
  // The service is the server's lifecycle: its `ready`, `drain` and `close`.
  return startFastify((fastifyOptions) => createTextCompletionApp(service, options, fastifyOptions), where, service);
}
