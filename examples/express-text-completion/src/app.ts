// The Ray Serve text-generator tutorial on Express, with an OpenAI-compatible endpoint, health probes and a graceful
// shutdown. Every route shares ONE batched model: concurrent requests coalesce into one model call.
import express from 'express';
import { batchErrorHandler, batchRoute } from '@microbatch/express';
import { BatchError, writeHttpError } from '@microbatch/core';
import { createHealth, instrumentBatcher, metricsHandler, toNodeHandler } from '@microbatch/prometheus';
import { Registry } from 'prom-client';
import { createCompletionsEndpoint, parseTextQuery, startTextCompletionServer, textQueryAnswer } from '@microbatch/serving';
import type { RunningServer, TextCompletionModel, TextCompletionServerOptions } from '@microbatch/serving';

/** The app's routes over a text-completion model (from `createTextCompletionModel`). */
export function createApp(model: TextCompletionModel): express.Express {
  const app = express();

  // The tutorial's curl: `curl "http://127.0.0.1:8000/?text=Once+upon+a+time"` prints the story, as plain text.
  app.get('/', batchRoute({
    batcher: model.generate,
    input: (req) => parseTextQuery(req.query.text, model.validate),
    output: (result, req, res) => res.type('text/plain').send(textQueryAnswer(req.query.text, result)),
  }));

  // OpenAI's completions API (JSON or `stream: true`), so existing OpenAI clients work unchanged.
  const completions = createCompletionsEndpoint(model);
  app.post('/v1/completions', express.json({ limit: '64kb' }), (req, res) => completions(req.body, res));

  // Liveness always 200; readiness 503 while the model loads and once the server drains.
  const health = createHealth({ batchers: model.batchers, ready: model.isReady });
  app.get('/healthz', toNodeHandler(health.liveness));
  app.get('/readyz', toNodeHandler(health.readiness));

  // Prometheus metrics of both batchers (queue wait, execution time, batch size, rejections by reason).
  const registry = new Registry();
  for (const batcher of model.batchers) instrumentBatcher(batcher, { registry });
  app.get('/metrics', metricsHandler(registry));

  app.use((req, res) => writeHttpError(res, new BatchError('NOT_FOUND', `No route for ${req.method} ${req.path}`)));
  app.use(batchErrorHandler()); // malformed JSON (400) and oversized bodies (413) as JSON errors
  return app;
}

/** Loads the model and listens at once (readiness says when the model is loaded). */
export function start(options: TextCompletionServerOptions): Promise<RunningServer> {
  return startTextCompletionServer(options, createApp);
}
