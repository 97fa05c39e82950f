// `microbatch worker --config FILE`: one worker process serving several models (text generation and encoders),
// each model's pool pulling from a queue of its own, named after the model (`name`), where the web replicas of the
// same file (`serve --queue URL --config FILE`) put that model's requests.
import { availableParallelism } from 'node:os';
import { otelTracer } from '@microbatch/core/otel';
import { dropUndefined } from '@microbatch/core/util';
import { createWorkerPool, textGenerationBatchKey, textGenerationResume } from '@microbatch/inference';
import { TEXT_COMPLETION_HANDLERS, createEncoderWorker, planThreads } from '@microbatch/serving';
import { exitOnSignals } from '../lifecycle.js';
import { createLogger } from '../logger.js';
import type { WorkerFlags } from '../program.js';
import { loadTransport, startQueueWorker } from '../queue-transport.js';
import { readServeConfig } from './config-file.js';
import type { ModelConfig } from './config-schema.js';
import { configModelDir } from './model-paths.js';

// An encoder item is one text or pair: a pull the size of one model call (the local encoders' default).
const ENCODER_PULL = 64;

type QueueWorker = Awaited<ReturnType<typeof startQueueWorker>>;

/** What every model's queue worker takes alike: the flags' and the process's. */
interface SharedWorkerOptions {
  readonly claimIdleMs: number | undefined;
  readonly maxDeliveries: number | undefined;
  readonly log: ReturnType<typeof createLogger>;
}

/** One model's side of the worker: what loads, how its queue worker starts once it has, and how it closes. */
interface ModelWorker {
  readonly ready: Promise<void>;
  readonly close: () => Promise<void>;
  readonly start: (shared: SharedWorkerOptions) => Promise<QueueWorker>;
}

/** A model's pool and queue worker: a decoder's pool, or an encoder's (`createEncoderWorker`). */
function modelWorker(
  model: ModelConfig,
  dir: string,
  flags: WorkerFlags,
  fail: (message: string) => never,
): ModelWorker {
  const start =
    <I, O, C>(options: Omit<Parameters<typeof startQueueWorker<I, O, C>>[2], keyof SharedWorkerOptions | 'tracer'>) =>
    (shared: SharedWorkerOptions) =>
      startQueueWorker<I, O, C>(flags.queue, model.name, { ...options, ...shared, tracer: otelTracer() }, fail);
  const poolOptions = dropUndefined({
    workers: model.workers,
    threads: model.threads,
    executionProvider: model.executionProvider,
  });
  if (model.task !== 'text-generation') {
    const maxBatchSize = flags.maxBatchSize ?? model.maxBatchSize ?? ENCODER_PULL;
    const encoder = createEncoderWorker({
      model: dir,
      task: model.task,
      dtype: model.dtype ?? 'auto',
      maxBatchSize,
      ...dropUndefined({ maxBatchCost: model.maxBatchCost }),
      ...poolOptions,
    });
    return {
      ready: encoder.ready,
      close: () => encoder.close(),
      start: start({
        handlers: encoder.handlers,
        maxBatchSize,
        concurrency: 2 * encoder.pool.size,
        batchWaitTimeoutMs: flags.batchWaitMs,
      }),
    };
  }
  const runner = {
    task: 'text-generation',
    model: dir,
    scheduling: model.scheduling ?? 'continuous',
    dtype: model.dtype ?? 'auto',
    ...dropUndefined({
      maxSequences: model.maxSequences,
      maxStepTokens: model.maxStepTokens,
      prefixCacheMb: model.prefixCacheMb,
    }),
  } as const;
  const { workers: size, ...threads } = poolOptions;
  const decoder = createWorkerPool({ runner, ...threads, ...dropUndefined({ size }) });
  return {
    ready: decoder.ready,
    close: () => decoder.close(),
    start: start({
      handlers: { [TEXT_COMPLETION_HANDLERS.generate]: decoder.handler },
      streamingHandlers: { [TEXT_COMPLETION_HANDLERS.stream]: decoder.streamingHandler },
      batchKey: decoder.scheduling === 'request' ? textGenerationBatchKey : undefined,
      resumable: decoder.scheduling === 'continuous' ? textGenerationResume : undefined,
      // Entries per pull and the wait to top a pull up: the flags, the same for every model's queue.
      maxBatchSize: flags.maxBatchSize,
      concurrency: decoder.scheduling === 'continuous' ? 2 * decoder.size : decoder.size,
      batchWaitTimeoutMs: flags.batchWaitMs,
    }),
  };
}

/**
 * Runs `microbatch worker --config FILE` until SIGTERM / SIGINT (which finish and answer every model's running
 * batches). The file is checked as `serve --config` checks it; its models' threads must fit the machine's cores.
 *
 * @example
 * ```ts
 * await workerConfig({ ...flags, config: 'models.yaml' }, fail);
 * ```
 */
export async function workerConfig(
  flags: WorkerFlags & { readonly config: string },
  fail: (message: string) => never,
): Promise<void> {
  const file = flags.config;
  let config;
  try {
    config = await readServeConfig(file);
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  const plan = planThreads(
    config.models.map((model) => ({ name: model.name, workers: model.workers ?? 1, threads: model.threads ?? 1 })),
    config.maxThreads ?? availableParallelism(),
  );
  if (!plan.fits) fail(`thread over-commit: the models need ${plan.summary}. Lower a model's workers or threads`);
  const dirs: string[] = [];
  for (const [index, model] of config.models.entries()) {
    await loadTransport(flags.queue, model.name, fail);
    dirs.push(await configModelDir(file, model, index, flags.modelsDir, fail));
  }
  const logger = createLogger(flags.logFormat);
  logger.info(
    { config: file, models: config.models.map((model) => model.name) },
    `microbatch worker: threads: ${plan.summary}`,
  );
  const models: ModelWorker[] = [];
  const closeModels = () => Promise.all(models.map((model) => model.close()));
  let loading: ModelConfig | undefined;
  try {
    for (const [index, model] of config.models.entries()) {
      loading = model;
      models.push(modelWorker(model, dirs[index] as string, flags, fail));
    }
    loading = undefined;
    await Promise.all(models.map((model) => model.ready));
  } catch (error) {
    await closeModels();
    const message = error instanceof Error ? error.message : String(error);
    // A folder that cannot serve its task names the file and the model; a load failure names itself.
    fail(loading === undefined ? message : `${file}: model ${JSON.stringify(loading.name)}: ${message}`);
  }
  const workers: QueueWorker[] = [];
  const shared = { claimIdleMs: flags.claimIdleMs, maxDeliveries: flags.maxDeliveries, log: logger };
  for (const model of models) workers.push(await model.start(shared));
  exitOnSignals(
    async () => {
      await Promise.all(workers.map((worker) => worker.close()));
      await closeModels();
    },
    { log: logger },
  );
  for (const [index, worker] of workers.entries()) {
    await worker.ready;
    logger.info({ worker: worker.workerId, model: config.models[index]?.name }, 'worker ready');
  }
}
