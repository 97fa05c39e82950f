// The encoder apps on Express: rerank and score (a cross-encoder) or classify, over one `ClassifierService`.
import type express from 'express';
import type { ClassifierService } from '../../service/classifier-service.js';
import { type EncoderAppOptions, encoderRoutes, noEncoderRoute } from '../encoder-routes.js';
import { type ListenOptions, type RunningServer, startServer } from '../serve.js';
import { expressApp } from './mounts.js';

/**
 * The encoder routes on Express: `POST /v1/rerank`, `/rerank`, `/v1/score` (a `rerank` service) or `POST /classify`
 * (a `text-classification` service), with `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`.
 *
 * @example
 * ```ts
 * createEncoderApp(createSequenceClassifier({ model: 'models/ms-marco', task: 'rerank' })).listen(8000);
 * ```
 */
export function createEncoderApp(service: ClassifierService, options: EncoderAppOptions = {}): express.Express {
  return expressApp(encoderRoutes(service, options), noEncoderRoute(service.task));
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
  return startServer(createEncoderApp(service, options), where, service);
}
