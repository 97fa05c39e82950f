import { basename } from 'node:path';
import type {
  ClassifierService,
  ClassifierTask,
  EncoderAppOptions,
  ListenOptions,
  RunningServer,
} from '@microbatch/serving';
import { createSequenceClassifier } from '@microbatch/serving';
import { loadAccess } from './access-flags.js';
import { failOnThrow, modelDirOrFail } from './command-steps.js';
import { serveUntilSignal } from './lifecycle.js';
import { loadFramework } from './load-framework.js';
import { createLogger } from './logger.js';
import type { ServeFlags } from './program.js';

type StartApp = (
  service: ClassifierService,
  where: ListenOptions,
  options?: EncoderAppOptions,
) => Promise<RunningServer>;

// Loaded on demand: `--framework express` never loads NestJS.
const APPS: Record<ServeFlags['framework'], () => Promise<{ startEncoderApp: StartApp }>> = {
  express: () => import('@microbatch/serving/express'),
  fastify: () => import('@microbatch/serving/fastify'),
  hono: () => import('@microbatch/serving/hono'),
  koa: () => import('@microbatch/serving/koa'),
  nest: () => import('@microbatch/serving/nest'),
};

/**
 * `microbatch serve --task text-classification` (`POST /classify`) or `--task rerank` (a cross-encoder:
 * `POST /v1/rerank`, `/rerank`, `/v1/score`): every text or pair one batched item costing its tokens
 * (`--max-batch-cost` tokens and `--max-batch-size` items per model call), a request's items admitted together.
 *
 * @example
 * ```ts
 * await serveEncoder({ ...flags, model: 'models/ms-marco-MiniLM-L-6-v2' }, 'rerank', fail);
 * ```
 */
export async function serveEncoder(
  flags: ServeFlags,
  task: ClassifierTask,
  fail: (message: string) => never,
): Promise<void> {
  const model = await modelDirOrFail(flags, fail);
  const { startEncoderApp } = await loadFramework(flags.framework, APPS[flags.framework], fail);
  const logger = createLogger(flags.logFormat);
  const access = loadAccess(flags, process.env, logger, fail);
  const { maxBatchSize, maxBatchCost, batchWaitMs, maxLatencyMs, maxQueueSize, workers, threads } = flags;
  const service = failOnThrow(
    () =>
      createSequenceClassifier({
        model,
        task,
        dtype: flags.dtype,
        maxBatchSize,
        maxBatchCost,
        batchWaitTimeoutMs: batchWaitMs,
        maxLatencyMs,
        maxQueueSize,
        workers,
        threads,
        executionProvider: flags.executionProvider,
        logger,
      }),
    fail,
  );
  logger.info(
    {
      model: basename(model),
      task,
      framework: flags.framework,
      dtype: flags.dtype,
      maxBatchSize,
      maxBatchCost: maxBatchCost ?? null,
      labels: service.labels,
      workers,
      threads,
    },
    'microbatch serve',
  );
  await serveUntilSignal(
    (where) => startEncoderApp(service, where, access.options),
    { port: flags.port, host: flags.host },
    logger,
  );
}
