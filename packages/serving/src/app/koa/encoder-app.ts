// The encoder apps on Koa: rerank and score (a cross-encoder) or classify, over one `ClassifierService`.
import type Koa from 'koa';
import type { ClassifierService } from '../../service/classifier-service.js';
import { type EncoderAppOptions, encoderRoutes, noEncoderRoute } from '../encoder-routes.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import { koaApp } from './mounts.js';

/**
 * The encoder routes on Koa: `POST /v1/rerank`, `/rerank`, `/v1/score` (a `rerank` service) or `POST /classify`,
 * with `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`.
 *
 * @example
 * ```ts
 * createEncoderApp(createSequenceClassifier({ model: 'models/ms-marco', task: 'rerank' })).listen(8000);
 * ```
 */
export function createEncoderApp(service: ClassifierService, options: EncoderAppOptions = {}): Koa {
  return koaApp(encoderRoutes(service, options), noEncoderRoute(service.task));
}

/**
 * Listens with {@link createEncoderApp} at once; `shutdown` drains the batcher and closes the model.
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
  const callback = createEncoderApp(service, options).callback();
  return startServer((req, res) => void callback(req, res), where, service);
}
