// The Ray Serve text-generator tutorial as a Fastify app, with the OpenAI completions API, health probes and
// Prometheus metrics. Every route shares ONE service: concurrent requests coalesce into one model call.
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { TextCompletionAppOptions } from '../app-options.js';
import { noRoute, textCompletionRoutes } from '../text-completion-routes.js';
import type { ListenOptions, RunningServer } from '../serve.js';
import type { TextCompletionService } from '../../service/text-completion-service.js';
import { createFastifyApp, startFastify } from './node-routes.js';

/**
 * The text-completion routes on Fastify (the table of `TEXT_COMPLETION_TABLE`): `GET /?text=` (plain text),
 * `POST /v1/completions` and `POST /v1/chat/completions` (OpenAI, JSON or SSE), `GET /v1/models`, `GET /healthz`,
 * `GET /readyz`, `GET /metrics`, `GET /dashboard`; another method on these paths is a JSON 405 with `Allow`,
 * anything else a JSON 404. Bodies are read by `@microbatch/fastify`'s plugin within a 64 KiB `bodyLimit`.
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
  return createFastifyApp(textCompletionRoutes(service, options), noRoute, fastifyOptions);
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
