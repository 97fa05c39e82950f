// OpenAI's embeddings API on Fastify: every input of every request is one batched item costing its tokens.
import { createHealth, instrumentBatcher, metricsHandler, toNodeHandler } from '@microbatch/prometheus';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { Registry } from 'prom-client';
import type { EmbeddingService } from '../embedding-model.js';
import { createEmbeddingsEndpoint } from '../embeddings-endpoint.js';
import type { EmbeddingsRequestLimits } from '../embeddings-request.js';
import { noEmbeddingsRoute } from '../embeddings-routes.js';
import { modelList } from '../models-endpoint.js';
import type { ListenOptions, RunningServer } from '../serve.js';
import { createFastifyApp, getNode, postJson, startFastify } from './node-routes.js';

/**
 * The embeddings routes on Fastify: `POST /v1/embeddings`, `GET /v1/models`, `/healthz`, `/readyz`, `/metrics`;
 * another method on these paths is a JSON 405 with `Allow`, anything else a JSON 404.
 *
 * @example
 * ```ts
 * await createEmbeddingsApp(createEmbeddingModel({ model: 'models/all-MiniLM-L6-v2' })).listen({ port: 8000 });
 * ```
 */
export function createEmbeddingsApp(
  service: EmbeddingService,
  options: { readonly limits?: EmbeddingsRequestLimits } = {},
  fastifyOptions: FastifyServerOptions = {},
): FastifyInstance {
  return createFastifyApp(
    (app) => {
      postJson(app, '/v1/embeddings', createEmbeddingsEndpoint(service, options.limits));
      const models = modelList(service.id, new Date());
      app.get('/v1/models', (_request, reply) => reply.send(models));
      const health = createHealth({ batchers: service.batchers, ready: () => service.isReady() });
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
      const registry = new Registry();
      for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
      getNode(app, '/metrics', metricsHandler(registry));
    },
    noEmbeddingsRoute,
    fastifyOptions,
  );
}

/**
 * Listens with {@link createEmbeddingsApp} at once; `shutdown` stops accepting, drains the batcher, waits for the
 * responses, then closes the model.
 *
 * @example
 * ```ts
 * const running = await startEmbeddingsApp(model, { port: 0, host: '127.0.0.1' });
 * ```
 */
export function startEmbeddingsApp(service: EmbeddingService, where: ListenOptions): Promise<RunningServer> {
  return startFastify((fastifyOptions) => createEmbeddingsApp(service, {}, fastifyOptions), where, service);
}
