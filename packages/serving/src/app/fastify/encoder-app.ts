// The encoder apps on Fastify: rerank and score (a cross-encoder) or classify, over one `ClassifierService`.
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { ClassifierService } from '../../service/classifier-service.js';
import { type EncoderAppOptions, encoderRoutes, noEncoderRoute } from '../encoder-routes.js';
import type { ListenOptions, RunningServer } from '../serve.js';
import { createFastifyApp, startFastify } from './node-routes.js';

/**
 * The encoder routes on Fastify: `POST /v1/rerank`, `/rerank`, `/v1/score` (a `rerank` service) or
 * `POST /classify`, with `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`; another method on these paths is a
 * JSON 405 with `Allow`, anything else a JSON 404.
 *
 * @example
 * ```ts
 * await createEncoderApp(reranker).listen({ port: 8000 });
 * ```
 */
export function createEncoderApp(
  service: ClassifierService,
  options: EncoderAppOptions = {},
  fastifyOptions: FastifyServerOptions = {},
): FastifyInstance {
  return createFastifyApp(encoderRoutes(service, options), noEncoderRoute(service.task), fastifyOptions);
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
  return startFastify((fastifyOptions) => createEncoderApp(service, options, fastifyOptions), where, service);
}
