import { DEFAULTS } from '@microbatch/core';
import { otelTracer } from '@microbatch/core/otel';
import { dropUndefined } from '@microbatch/core/util';
import { createWorkerPool, textGenerationBatchKey, textGenerationResume } from '@microbatch/inference';
import { TEXT_COMPLETION_HANDLERS } from '@microbatch/serving';
import { failOnThrow, modelDirOrFail } from './command-steps.js';
import { createLogger } from './logger.js';
import { queueName } from './model-dir.js';
import { loadTransport, redact, runQueueWorker } from './queue-transport.js';
import { flagScheduling } from './flag-rules.js';
import type { WorkerFlags } from './program.js';
import { workerConfig } from './config/worker-config.js';
import { encoderWorkerCommand } from './encoder-worker-command.js';

/**
 * Runs `microbatch worker`: loads the model in worker threads, then pulls batches of text-completion items (an
 * encoder's texts and pairs with `--task`, `encoder-worker-command.ts`) from the
 * Redis or NATS queue (`--queue`'s scheme) named after the model (every web replica's items) until SIGTERM / SIGINT, which finish and answer the
 * batches running, then exit 0. A model that fails to load prints why and exits 1.
 *
 * @example
 * ```ts
 * await workerCommand({ ...flags, queue: 'redis://127.0.0.1:6379', model: 'models/tinystories-656k' }, fail);
 * ```
 */
export async function workerCommand(flags: WorkerFlags, fail: (message: string) => never): Promise<void> {
  const { config } = flags;
  if (config !== undefined) return workerConfig({ ...flags, config }, fail);
  if (flags.task !== 'text-generation') return encoderWorkerCommand(flags, flags.task, fail);
  const model = await modelDirOrFail(flags, fail);
  const queue = queueName(model);
  await loadTransport(flags.queue, queue, fail);
  const { maxBatchSize, batchWaitMs, workers, threads, executionProvider, claimIdleMs, maxDeliveries } = flags;
  const choice = failOnThrow(() => flagScheduling(model, flags, 'worker'), fail);
  const { scheduling } = choice;
  const logger = createLogger(flags.logFormat);
  if (choice.fallback !== undefined) logger.warn({ scheduling }, choice.fallback);
  // A deployment may set it for every process; a worker serves no HTTP, so it says it does not read it.
  if ((process.env.MICROBATCH_API_KEY ?? '') !== '') {
    logger.info(
      {},
      'MICROBATCH_API_KEY is not read by a worker: the web replicas (microbatch serve --queue) check keys',
    );
  }
  const runner = {
    task: 'text-generation',
    model,
    scheduling,
    dtype: flags.dtype,
    ...dropUndefined({
      maxSequences: flags.maxSequences,
      maxStepTokens: flags.maxStepTokens,
      prefixCacheMb: flags.prefixCacheMb,
    }),
  } as const;
  const pool = createWorkerPool({ runner, ...dropUndefined({ size: workers, threads, executionProvider }) });
  // What runs: read back from the pool where it knows, the flags given otherwise (the rest are the defaults).
  logger.info(
    {
      model: queue,
      queue: redact(flags.queue),
      scheduling: pool.scheduling,
      dtype: flags.dtype,
      workers: pool.size,
      maxBatchSize: maxBatchSize ?? DEFAULTS.maxBatchSize,
      batchWaitMs: batchWaitMs ?? DEFAULTS.batchWaitTimeoutMs,
      ...dropUndefined({
        maxSequences: flags.maxSequences,
        maxStepTokens: flags.maxStepTokens,
        prefixCacheMb: flags.prefixCacheMb,
        threads,
        executionProvider,
        claimIdleMs,
        maxDeliveries,
      }),
    },
    'microbatch worker',
  );
  await runQueueWorker(
    flags.queue,
    queue,
    pool,
    {
      handlers: { [TEXT_COMPLETION_HANDLERS.generate]: pool.handler },
      streamingHandlers: { [TEXT_COMPLETION_HANDLERS.stream]: pool.streamingHandler },
      // Request scheduling splits batches by sampling settings; a continuous decode loop takes any mix.
      batchKey: scheduling === 'request' ? textGenerationBatchKey : undefined,
      // Continuous: a stream whose worker dies continues on another from the token ids it sent.
      resumable: pool.scheduling === 'continuous' ? textGenerationResume : undefined,
      maxBatchSize,
      // Continuous: a second pull waits beside each worker's running loop, ready to join it at the next step.
      concurrency: scheduling === 'continuous' ? 2 * pool.size : pool.size,
      batchWaitTimeoutMs: batchWaitMs,
      claimIdleMs,
      maxDeliveries,
      log: logger,
      // Batch spans linked to (or the child of) the replicas' request traces, once an SDK is registered.
      tracer: otelTracer(),
    },
    { model: queue },
    fail,
  );
}
