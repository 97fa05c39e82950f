import { basename } from 'node:path';
import type {
  ListenOptions,
  RunningServer,
  TextCompletionAppOptions,
  TextCompletionService,
} from '@microbatch/serving';
import { DEFAULTS } from '@microbatch/core';
import { dropUndefined } from '@microbatch/core/util';
import { createQueuedTextCompletionService, createTextCompletionModel } from '@microbatch/serving';
import { loadAccess } from './access-flags.js';
import { failOnThrow, modelDirOrFail } from './command-steps.js';
import { loadTransport, openBatchStorage, openReplicaQueue, redact } from './queue-transport.js';
import { serveUntilSignal } from './lifecycle.js';
import { loadFramework } from './load-framework.js';
import { batchApiOf } from './batch-api-flags.js';
import { serveEmbeddings } from './serve-embeddings.js';
import { serveEncoder } from './serve-encoder.js';
import { serveEncoderFromQueue } from './serve-encoder-queue.js';
import { flagsModelConfig } from './config/flags-config.js';
import { textModelOptions } from './config/model-options.js';
import { serveConfig } from './config/serve-config.js';
import { createLogger } from './logger.js';
import { queueName } from './model-dir.js';
import { flagScheduling } from './flag-rules.js';
import type { ServeFlags } from './program.js';

/** What each `@microbatch/serving/<framework>` subpath exports. */
type StartApp = (
  service: TextCompletionService,
  where: ListenOptions,
  options?: TextCompletionAppOptions,
) => Promise<RunningServer>;

// Loaded on demand: `--framework express` never loads NestJS.
const APPS: Record<ServeFlags['framework'], () => Promise<{ startTextCompletionApp: StartApp }>> = {
  express: () => import('@microbatch/serving/express'),
  koa: () => import('@microbatch/serving/koa'),
  fastify: () => import('@microbatch/serving/fastify'),
  hono: () => import('@microbatch/serving/hono'),
  nest: () => import('@microbatch/serving/nest'),
};

/**
 * Runs `microbatch serve`: checks the model directory (a clear error at once if it is missing), starts the chosen
 * framework's app from `@microbatch/serving` on it, and serves until SIGTERM / SIGINT, which drain the requests in
 * flight and exit 0. A model that fails to load prints why and exits 1.
 *
 * @example
 * ```ts
 * await serveCommand({ ...flags, model: 'models/tinystories-656k', framework: 'koa' }, fail);
 * ```
 */
export async function serveCommand(flags: ServeFlags, fail: (message: string) => never): Promise<void> {
  const { config } = flags;
  if (config !== undefined) return serveConfig({ ...flags, config }, fail);
  if (flags.queue !== undefined && flags.task !== 'text-generation')
    return serveEncoderFromQueue(flags, flags.task, flags.queue, fail);
  if (flags.task === 'feature-extraction') return serveEmbeddings(flags, fail);
  if (flags.task === 'text-classification' || flags.task === 'rerank') return serveEncoder(flags, flags.task, fail);
  if (flags.queue !== undefined) return serveFromQueue(flags, flags.queue, fail);
  const model = await modelDirOrFail(flags, fail);
  const choice = failOnThrow(() => flagScheduling(model, flags, 'serve'), fail);
  const { startTextCompletionApp } = await loadApp(flags.framework, fail);
  const logger = createLogger(flags.logFormat);
  if (choice.fallback !== undefined) logger.warn({ scheduling: choice.scheduling }, choice.fallback);
  const access = loadAccess(flags, process.env, logger, fail);
  // The app releases the model itself if it cannot listen (the workers would keep the process alive).
  await serveUntilSignal(
    (where) => {
      // The flags are a one-model config: its settings become the model's options where a config file's do; the
      // scheduling is the one the graph allows (a graph without a KV cache falls back to request scheduling).
      const service = createTextCompletionModel({
        ...textModelOptions(flagsModelConfig(flags, model), model, logger),
        scheduling: choice.scheduling,
      });
      // What runs, read back from the batcher and the pool rather than from the flags.
      const { generate, pool } = service;
      logger.info(
        {
          model: basename(model),
          task: flags.task,
          framework: flags.framework,
          scheduling: pool.scheduling,
          dtype: flags.dtype,
          maxBatchSize: generate.maxBatchSize,
          batchWaitMs: generate.batchWaitTimeoutMs,
          maxConcurrentBatches: generate.maxConcurrentBatches,
          maxLatencyMs: flags.maxLatencyMs ?? null,
          maxQueueSize: flags.maxQueueSize ?? DEFAULTS.maxQueueSize,
          workers: pool.size,
          readiness: flags.readiness,
          apiKeys: access.keyNames,
          fairnessKey: access.fairnessKey,
          ...dropUndefined({
            maxSequences: flags.maxSequences,
            maxStepTokens: flags.maxStepTokens,
            prefixCacheMb: flags.prefixCacheMb,
            threads: flags.threads,
            executionProvider: flags.executionProvider,
          }),
        },
        'microbatch serve',
      );
      return startTextCompletionApp(service, where, {
        readiness: flags.readiness,
        sharedPrefixCache: flags.sharedPrefixCache === true,
        ...access.options,
        ...batchApiOf(flags),
      });
    },
    { port: flags.port, host: flags.host },
    logger,
  );
}

/**
 * `microbatch serve --queue redis://...|nats://...`: a web replica with no local model. Its items go to the queue named after
 * `--model` (a folder's name, or the name itself), where workers of that model pull them, batched with every other
 * replica's. The HTTP API is the same; `/readyz` is ready while the broker is connected and a worker is alive.
 */
async function serveFromQueue(flags: ServeFlags, url: string, fail: (message: string) => never): Promise<void> {
  const queue = queueName(flags.model);
  await loadTransport(url, queue, fail);
  const logger = createLogger(flags.logFormat);
  const { startTextCompletionApp } = await loadApp(flags.framework, fail);
  const access = loadAccess(flags, process.env, logger, fail);
  logger.info(
    {
      model: queue,
      apiKeys: access.keyNames,
      fairnessKey: access.fairnessKey,
      task: flags.task,
      framework: flags.framework,
      queue: redact(url),
      maxQueueSize: flags.maxQueueSize ?? DEFAULTS.maxQueueSize,
      maxLatencyMs: flags.maxLatencyMs ?? null,
    },
    'microbatch serve (web replica)',
  );
  await serveUntilSignal(
    async (where) => {
      const redisQueue = await openReplicaQueue(url, queue, flags, logger, fail);
      // `--batch-api`: files, batches and results in the broker, shared by every replica; batch lines go through
      // the queued service like interactive requests (at the lowest priority), so the workers run them.
      const storage = flags.batchApi === true ? await openBatchStorage(url, fail) : undefined;
      const running = await startTextCompletionApp(
        createQueuedTextCompletionService(redisQueue, { id: queue, maxLatencyMs: flags.maxLatencyMs }),
        where,
        {
          readiness: flags.readiness,
          sharedPrefixCache: flags.sharedPrefixCache === true,
          ...access.options,
          ...batchApiOf(flags, storage),
        },
      );
      if (storage === undefined) return running;
      logger.info({ batchStorage: storage.description }, 'Batch API on the broker');
      // The broker's connections are closed once the server has stopped (its last batch writes are done).
      const stop = async (): Promise<void> => {
        try {
          await running.shutdown();
        } finally {
          await storage.close();
        }
      };
      let stopping: Promise<void> | undefined;
      return { ...running, shutdown: () => (stopping ??= stop()) };
    },
    { port: flags.port, host: flags.host },
    logger,
  );
}

/**
 * The chosen framework's app, loaded only now: `--framework express` never loads NestJS, and a framework that is
 * not installed (Fastify, Hono and Nest are optional peer dependencies) is an error saying what to install.
 */
async function loadApp(
  framework: ServeFlags['framework'],
  fail: (message: string) => never,
): Promise<{ startTextCompletionApp: StartApp }> {
  return loadFramework(framework, APPS[framework], fail);
}
