// The encoder apps on Hono (served by `@hono/node-server`): rerank and score (a cross-encoder) or classify, over
// one `ClassifierService`.
import type { Hono } from 'hono';
import type { ClassifierService } from '../../service/classifier-service.js';
import { type EncoderAppOptions, encoderRoutes, noEncoderRoute } from '../encoder-routes.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import { honoApp, nodeListener } from './node-routes.js';

/**
 * The encoder routes on Hono: `POST /v1/rerank`, `/rerank`, `/v1/score` (a `rerank` service) or `POST /classify`,
 * with `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`. Serve it with `@hono/node-server`.
 *
 * @example
 * ```ts
 * serve({ fetch: createEncoderApp(reranker).fetch, port: 8000 });
 * ```
 */
export function createEncoderApp(service: ClassifierService, options: EncoderAppOptions = {}): Hono {
  return honoApp(encoderRoutes(service, options), noEncoderRoute(service.task));
}

/**
 * Listens with {@link createEncoderApp} at once; `shutdown` stops accepting, drains the batcher, waits for the
 * responses, then closes the model.
 *
 * @example
 * ```ts
 * const running = await startEncoderApp(reranker, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startEncoderApp(
  service: ClassifierService,
  where: ListenOptions,
  options: EncoderAppOptions = {},
): Promise<RunningServer> {
  return startServer(nodeListener(createEncoderApp(service, options)), where, service);
}
