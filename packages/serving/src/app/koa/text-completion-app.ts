// The Ray Serve text-generator tutorial as a Koa app, with the OpenAI completions API, health probes and
// Prometheus metrics. Every route shares ONE service: concurrent requests coalesce into one model call.
import type Koa from 'koa';
import type { TextCompletionAppOptions } from '../app-options.js';
import { noRoute, textCompletionRoutes } from '../text-completion-routes.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import type { TextCompletionService } from '../../service/text-completion-service.js';
import { koaApp } from './mounts.js';

/**
 * The text-completion routes on Koa (the table of `TEXT_COMPLETION_TABLE`): `GET /?text=` (plain text),
 * `POST /v1/completions` and `POST /v1/chat/completions` (OpenAI, JSON or SSE), `GET /v1/models`, `GET /healthz`,
 * `GET /readyz`, `GET /metrics`, `GET /dashboard`; another method on these paths is a JSON 405 with `Allow`,
 * anything else a JSON 404.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k' });
 * createTextCompletionApp(model).listen(8000);
 * ```
 */
export function createTextCompletionApp(service: TextCompletionService, options: TextCompletionAppOptions = {}): Koa {
  return koaApp(textCompletionRoutes(service, options), noRoute);
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
