import { basename } from 'node:path';
import type { EmbeddingService, EmbeddingsAppOptions, ListenOptions, RunningServer } from '@microbatch/serving';
import { createEmbeddingModel } from '@microbatch/serving';
import { batchApiOf } from './batch-api-flags.js';
import { serveUntilSignal } from './lifecycle.js';
import { loadAccess } from './access-flags.js';
import { failOnThrow, modelDirOrFail } from './command-steps.js';
import { loadFramework } from './load-framework.js';
import { createLogger } from './logger.js';
import { flagsModelConfig } from './config/flags-config.js';
import { embeddingModelOptions } from './config/model-options.js';
import type { ServeFlags } from './program.js';

type StartApp = (
  service: EmbeddingService,
  where: ListenOptions,
  options?: EmbeddingsAppOptions,
) => Promise<RunningServer>;

// Loaded on demand: `--framework express` never loads NestJS.
const APPS: Record<ServeFlags['framework'], () => Promise<{ startEmbeddingsApp: StartApp }>> = {
  express: () => import('@microbatch/serving/express'),
  fastify: () => import('@microbatch/serving/fastify'),
  hono: () => import('@microbatch/serving/hono'),
  koa: () => import('@microbatch/serving/koa'),
  nest: () => import('@microbatch/serving/nest'),
};

/**
 * `microbatch serve --task feature-extraction`: an embedding model behind `POST /v1/embeddings`, every input one
 * batched item costing its tokens (`--max-batch-cost` tokens and `--max-batch-size` inputs per model call).
 *
 * @example
 * ```ts
 * await serveEmbeddings({ ...flags, task: 'feature-extraction', model: 'models/all-MiniLM-L6-v2' }, fail);
 * ```
 */
export async function serveEmbeddings(flags: ServeFlags, fail: (message: string) => never): Promise<void> {
  const model = await modelDirOrFail(flags, fail);
  const { startEmbeddingsApp } = await loadFramework(flags.framework, APPS[flags.framework], fail);
  const logger = createLogger(flags.logFormat);
  const access = loadAccess(flags, process.env, logger, fail);
  const { maxBatchSize, maxBatchCost, workers, threads } = flags;
  const service = failOnThrow(
    () => createEmbeddingModel(embeddingModelOptions(flagsModelConfig(flags, model), model, logger)),
    fail,
  );
  logger.info(
    {
      model: basename(model),
      task: flags.task,
      framework: flags.framework,
      dtype: flags.dtype,
      maxBatchSize,
      maxBatchCost: maxBatchCost ?? null,
      pooling: service.pooling,
      normalize: service.normalize,
      dimensions: service.dimensions,
      workers,
      threads,
      apiKeys: access.keyNames,
      fairnessKey: access.fairnessKey,
    },
    'microbatch serve',
  );
  await serveUntilSignal(
    (where) => startEmbeddingsApp(service, where, { ...access.options, ...batchApiOf(flags) }),
    { port: flags.port, host: flags.host },
    logger,
  );
}
