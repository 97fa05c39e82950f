// The Ray Serve text-generator tutorial as a Koa app, with the OpenAI completions API and health probes. Every
// route shares ONE service: concurrent requests coalesce into one model call.
import { Router } from '@koa/router';
import { batchErrorHandler, batchRoute, jsonBody } from '@microbatch/koa';
import {
  type NodeHandler,
  createGenerationMetrics,
  createHealth,
  dashboardHandler,
  metricsHandler,
  toNodeHandler,
} from '@microbatch/prometheus';
import Koa from 'koa';
import { Registry } from 'prom-client';
import type { TextCompletionAppOptions } from '../app-options.js';
import { createChatCompletionsEndpoint } from '../chat-endpoint.js';
import { fairnessKeyOf } from '../client-key.js';
import { decodeBatchHeaders } from '../completion-response.js';
import { createCompletionsEndpoint } from '../completions-endpoint.js';
import { noRoute } from '../routes.js';
import { instrumentTextCompletionService } from '../service-metrics.js';
import { modelList } from '../models-endpoint.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import type { TextCompletionService } from '../text-completion-model.js';
import { parseTextQuery, textQueryAnswer } from '../text-query.js';

const CLIENT_GONE: ReadonlySet<string> = new Set([
  'ECONNRESET',
  'EPIPE',
  'ECONNABORTED',
  'ERR_STREAM_PREMATURE_CLOSE',
  'ERR_HTTP_REQUEST_TIMEOUT',
]);

/**
 * The text-completion routes on Koa: `GET /?text=` (plain text), `POST /v1/completions` (OpenAI, JSON or SSE),
 * `GET /healthz`, `GET /readyz`, `GET /metrics`; anything else is a JSON 404.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k' });
 * createTextCompletionApp(model).listen(8000);
 * ```
 */
export function createTextCompletionApp(service: TextCompletionService, options: TextCompletionAppOptions = {}): Koa {
  const router = new Router();

  // The tutorial's curl: `curl "http://127.0.0.1:8000/?text=Once+upon+a+time"` prints the story, as plain text.
  router.get(
    '/',
    batchRoute({
      batcher: service.generate,
      input: (ctx) => parseTextQuery(ctx.query.text, service.validate),
      // Each client (its address, or the app's `clientKey`) gets a fair share of admission and of each batch.
      callOptions: (ctx) => ({ fairnessKey: fairnessKeyOf(ctx.req, options.clientKey) }),
      output: (result, ctx) => {
        // Continuous scheduling: the decode loop's batch, not the batcher's single-request dispatch.
        ctx.set(decodeBatchHeaders([result]));
        ctx.type = 'text/plain';
        ctx.body = textQueryAnswer(ctx.query.text, result);
      },
    }),
  );

  // OpenAI's completions API (JSON or `stream: true`); the endpoint writes the Node response itself.
  const registry = new Registry();
  const generation = createGenerationMetrics({ model: service.id, registry });
  const completions = createCompletionsEndpoint(service, options.limits, options.clientKey, generation);
  router.post('/v1/completions', jsonBody(), async (ctx) => {
    ctx.respond = false;
    await completions((ctx.request as { body?: unknown }).body, ctx.res);
  });
  const chat = createChatCompletionsEndpoint(service, undefined, options.clientKey);
  router.post('/v1/chat/completions', jsonBody(), async (ctx) => {
    ctx.respond = false;
    await chat((ctx.request as { body?: unknown }).body, ctx.res);
  });

  // What `client.models.list()` of the official OpenAI clients reads.
  const models = modelList(service.id, new Date());
  router.get('/v1/models', (ctx) => {
    ctx.body = models;
  });

  // Liveness always 200; readiness 503 while the model loads and once the server drains.
  const health = createHealth({
    batchers: service.batchers,
    ready: () => service.isReady(),
    ...(options.readiness === undefined ? {} : { mode: options.readiness }),
  });
  // The probes and metrics answer through the same Node handlers as on Express and Nest: the same bytes and headers
  // (`Cache-Control: no-store`) on all three.
  const nodeRoute = (handler: NodeHandler) => async (ctx: Koa.Context) => {
    ctx.respond = false;
    await handler(ctx.req, ctx.res);
  };
  router.get('/healthz', nodeRoute(toNodeHandler(() => health.liveness())));
  router.get('/readyz', nodeRoute(toNodeHandler(() => health.readiness())));

  // Prometheus metrics of both batchers, as the Express and Nest apps serve them.
  instrumentTextCompletionService(service, registry);
  router.get('/metrics', nodeRoute(metricsHandler(registry)));
  // A live page of the same figures: batch sizes, queue, throughput, latency percentiles, refusals.
  router.get('/dashboard', nodeRoute(dashboardHandler({ registry, title: `microbatch · ${service.id}` })));

  // The error handler goes first: it answers body problems (400, 413, 415) and unknown routes as JSON.
  const app = new Koa();
  // Koa logs every `error` event (server faults reach it from batchErrorHandler); a client that broke the protocol
  // mid-request (a bad chunk size, a reset) is the client's problem, as on Express and Nest, not a log line.
  app.on('error', (error: unknown) => {
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && (code.startsWith('HPE_') || CLIENT_GONE.has(code))) return;
    console.error(error);
  });
  app.use(batchErrorHandler());
  // @koa/router answers HEAD with the GET route: never run the model for a response without a body.
  app.use(async (ctx, next) => {
    if (ctx.method !== 'HEAD' || ctx.path !== '/') return next();
    ctx.type = 'text/plain';
    ctx.body = '';
  });
  app.use(router.routes());
  app.use((ctx) => {
    throw noRoute(ctx.method, ctx.path);
  });
  return app;
}

/**
 * Listens with {@link createTextCompletionApp} at once (readiness says when the service can serve); `shutdown`
 * stops accepting, drains the service's batchers, waits for the responses, then closes the service.
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
  const callback = createTextCompletionApp(service, options).callback();
  // Koa answers its own errors (`ctx.onerror`): the promise its callback returns never rejects.
  // The service is the server's lifecycle: its `ready`, `drain` and `close`.
  return startServer((req, res) => void callback(req, res), where, service);
}
