// The Ray Serve text-generator tutorial as a Hono app on Node (`@hono/node-server`), with the OpenAI completions
// API, health probes and Prometheus metrics. Every route shares ONE service: concurrent requests coalesce into one
// model call. The model runs in Node worker threads, so this app is Node's; `@microbatch/hono` itself is not.
import { batchErrorHandler, batchRoute, errorResponse } from '@microbatch/hono';
import {
  createGenerationMetrics,
  createHealth,
  dashboardHandler,
  metricsHandler,
  toNodeHandler,
} from '@microbatch/prometheus';
import { type Context, Hono } from 'hono';
import { Registry } from 'prom-client';
import type { TextCompletionAppOptions } from '../app-options.js';
import { createChatCompletionsEndpoint } from '../chat-endpoint.js';
import { fairnessKeyOf } from '../client-key.js';
import { decodeBatchHeaders } from '../completion-response.js';
import { createCompletionsEndpoint } from '../completions-endpoint.js';
import { noRoute, requestPath } from '../routes.js';
import { instrumentTextCompletionService } from '../service-metrics.js';
import { modelList } from '../models-endpoint.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import type { TextCompletionService } from '../text-completion-model.js';
import { parseTextQuery, textQueryAnswer } from '../text-query.js';
import { getNode, node, nodeListener, postJson } from './node-routes.js';

/** `text` as Express and Koa read it: one value, the values of a repeated parameter, or none. */
function textParameter(c: Context): unknown {
  const values = c.req.queries('text');
  return values === undefined ? undefined : values.length === 1 ? values[0] : values;
}

/**
 * The text-completion routes on Hono: `GET /?text=` (plain text), `POST /v1/completions` and
 * `POST /v1/chat/completions` (OpenAI, JSON or SSE), `GET /v1/models`, `GET /healthz`, `GET /readyz`, `GET /metrics`,
 * `GET /dashboard`; another method on these paths is a JSON 405 with
 * `Allow`, anything else a JSON 404. Serve it with `@hono/node-server` (it writes streams to the Node response).
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k' });
 * serve({ fetch: createTextCompletionApp(model).fetch, port: 8000 });
 * ```
 */
export function createTextCompletionApp(service: TextCompletionService, options: TextCompletionAppOptions = {}): Hono {
  const app = new Hono();
  // Hono routes the URL as `new URL()` resolved it (`/v1/../healthz` is `/healthz` there); the path as sent that
  // differs matches no route, a 404 as on Express and Koa.
  // (Only on `@hono/node-server`: `app.request()` and other runtimes have no Node request to read.)
  app.use(async (c, next) => {
    const incoming = (c.env as Partial<ReturnType<typeof node>> | undefined)?.incoming;
    const sent = incoming === undefined ? c.req.path : requestPath(incoming.url);
    return sent === c.req.path ? next() : errorResponse(c, noRoute(c.req.method, sent));
  });
  // The tutorial's curl: `curl "http://127.0.0.1:8000/?text=Once+upon+a+time"` prints the story, as plain text.
  // Hono answers HEAD with the GET route: never run the model for a response without a body.
  app.get(
    '/',
    async (c, next) => (c.req.method === 'HEAD' ? c.body(null, 200, { 'Content-Type': 'text/plain' }) : next()),
    batchRoute({
      batcher: service.generate,
      input: (c) => parseTextQuery(textParameter(c), (body) => service.validate(body)),
      // Continuous scheduling: the decode loop's batch, not the batcher's single-request dispatch.
      output: (result, c) => c.text(textQueryAnswer(textParameter(c), result), 200, decodeBatchHeaders([result])),
      // Each client (its address, or the app's `clientKey`) gets a fair share of admission and of each batch.
      callOptions: (c) => ({ fairnessKey: fairnessKeyOf(node(c).incoming, options.clientKey) }),
    }),
  );

  // OpenAI's APIs (JSON or `stream: true`), so existing OpenAI clients work unchanged.
  const registry = new Registry();
  const generation = createGenerationMetrics({ model: service.id, registry });
  postJson(app, '/v1/completions', createCompletionsEndpoint(service, options.limits, options.clientKey, generation));
  postJson(app, '/v1/chat/completions', createChatCompletionsEndpoint(service, undefined, options.clientKey));
  // What `client.models.list()` of the official OpenAI clients reads.
  const models = modelList(service.id, new Date());
  app.get('/v1/models', (c) => c.json(models));

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

  app.notFound((c) => errorResponse(c, noRoute(c.req.method, c.req.path)));
  app.onError(batchErrorHandler());
  return app;
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
  return startServer(nodeListener(createTextCompletionApp(service, options)), where, service);
}
