// The Ray Serve text-generator tutorial as an Express app, with the OpenAI completions API, health probes and
// Prometheus metrics. Every route shares ONE service: concurrent requests coalesce into one model call.
import { writeHttpError, writeJson } from '@microbatch/core/http';
import { batchErrorHandler, batchRoute, jsonBody } from '@microbatch/express';
import {
  createGenerationMetrics,
  createHealth,
  dashboardHandler,
  metricsHandler,
  toNodeHandler,
} from '@microbatch/prometheus';
import express from 'express';
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

/**
 * The text-completion routes on Express: `GET /?text=` (plain text), `POST /v1/completions` (OpenAI, JSON or SSE),
 * `GET /healthz`, `GET /readyz`, `GET /metrics`; another method on these paths is a JSON 405 with `Allow`, anything
 * else a JSON 404.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k' });
 * createTextCompletionApp(model).listen(8000);
 * ```
 */
export function createTextCompletionApp(
  service: TextCompletionService,
  options: TextCompletionAppOptions = {},
): express.Express {
  const app = express();
  // Nothing to tell a client about the stack.
  app.disable('x-powered-by');
  // Express answers HEAD with the GET route: never run the model for a response without a body.
  app.head('/', (_req, res) => void res.type('text/plain').end());

  // The tutorial's curl: `curl "http://127.0.0.1:8000/?text=Once+upon+a+time"` prints the story, as plain text.
  app.get(
    '/',
    batchRoute({
      batcher: service.generate,
      input: (req) => parseTextQuery(req.query.text, service.validate),
      // Continuous scheduling: the decode loop's batch, not the batcher's single-request dispatch.
      output: (result, req, res) =>
        res
          .set(decodeBatchHeaders([result]))
          .type('text/plain')
          .send(textQueryAnswer(req.query.text, result)),
      // Each client (its address, or the app's `clientKey`) gets a fair share of admission and of each batch.
      callOptions: (req) => ({ fairnessKey: fairnessKeyOf(req, options.clientKey) }),
    }),
  );

  // OpenAI's completions API (JSON or `stream: true`), so existing OpenAI clients work unchanged.
  const registry = new Registry();
  const generation = createGenerationMetrics({ model: service.id, registry });
  const completions = createCompletionsEndpoint(service, options.limits, options.clientKey, generation);
  app.post('/v1/completions', jsonBody(), (req, res) => completions(req.body, res));
  const chat = createChatCompletionsEndpoint(service, undefined, options.clientKey);
  app.post('/v1/chat/completions', jsonBody(), (req, res) => chat(req.body, res));
  // What `client.models.list()` of the official OpenAI clients reads.
  const models = modelList(service.id, new Date());
  app.get('/v1/models', (_req, res) => writeJson(res, 200, models));

  // Liveness always 200; readiness 503 while the model loads and once the server drains.
  const health = createHealth({
    batchers: service.batchers,
    ready: () => service.isReady(),
    ...(options.readiness === undefined ? {} : { mode: options.readiness }),
  });
  app.get('/healthz', toNodeHandler(health.liveness));
  app.get('/readyz', toNodeHandler(health.readiness));

  // Prometheus metrics of both batchers (queue wait, execution time, batch size, rejections by reason).
  instrumentTextCompletionService(service, registry);
  app.get('/metrics', metricsHandler(registry));
  // A live page of the same figures: batch sizes, queue, throughput, latency percentiles, refusals.
  app.get('/dashboard', dashboardHandler({ registry, title: `microbatch · ${service.id}` }));

  app.use((req, res) => writeHttpError(res, noRoute(req.method, req.path)));
  app.use(batchErrorHandler()); // body problems (400, 413, 415) as JSON errors with fixed messages
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
  // The service is the server's lifecycle: its `ready`, `drain` and `close`.
  return startServer(createTextCompletionApp(service, options), where, service);
}
