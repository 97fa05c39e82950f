// `microbatch worker --task feature-extraction|rerank|text-classification`: an encoder's queue worker. It loads the
// graph on worker threads and pulls the entries web replicas (`serve --task <same> --queue`) tokenized and queued,
// from the queue named after the model, as a text-generation worker does.
import { otelTracer } from '@microbatch/core/otel';
import { dropUndefined } from '@microbatch/core/util';
import { type EncoderTask, createEncoderWorker } from '@microbatch/serving';
import { failOnThrow, modelDirOrFail } from './command-steps.js';
import { createLogger } from './logger.js';
import { queueName } from './model-dir.js';
import { loadTransport, redact, runQueueWorker } from './queue-transport.js';
import type { WorkerFlags } from './program.js';

// An encoder item is one text or pair: a pull the size of one model call (the local encoders' default).
const DEFAULT_PULL = 64;

/**
 * Runs an encoder's queue worker until SIGTERM / SIGINT (which finish and answer the batches running, then exit 0).
 * A folder that cannot serve the task, or a model that fails to load, prints why and exits 1.
 *
 * @example
 * ```ts
 * await encoderWorkerCommand({ ...flags, model: 'models/ms-marco-MiniLM-L-6-v2' }, 'rerank', fail);
 * ```
 */
export async function encoderWorkerCommand(
  flags: WorkerFlags,
  task: EncoderTask,
  fail: (message: string) => never,
): Promise<void> {
  const model = await modelDirOrFail(flags, fail);
  const queue = queueName(model);
  await loadTransport(flags.queue, queue, fail);
  const maxBatchSize = flags.maxBatchSize ?? DEFAULT_PULL;
  const encoder = failOnThrow(
    () =>
      createEncoderWorker({
        model,
        task,
        dtype: flags.dtype,
        maxBatchSize,
        ...dropUndefined({
          maxBatchCost: flags.maxBatchCost,
          workers: flags.workers,
          threads: flags.threads,
          executionProvider: flags.executionProvider,
        }),
      }),
    fail,
  );
  const logger = createLogger(flags.logFormat);
  logger.info(
    {
      model: queue,
      task,
      queue: redact(flags.queue),
      dtype: flags.dtype,
      workers: encoder.pool.size,
      maxBatchSize,
      maxBatchCost: flags.maxBatchCost ?? null,
      ...dropUndefined({
        threads: flags.threads,
        executionProvider: flags.executionProvider,
        claimIdleMs: flags.claimIdleMs,
        maxDeliveries: flags.maxDeliveries,
      }),
    },
    'microbatch worker',
  );
  await runQueueWorker(
    flags.queue,
    queue,
    encoder,
    {
      handlers: encoder.handlers,
      maxBatchSize,
      // A second pull waits beside each running one, so a worker thread never idles for a broker round trip.
      concurrency: 2 * encoder.pool.size,
      batchWaitTimeoutMs: flags.batchWaitMs,
      claimIdleMs: flags.claimIdleMs,
      maxDeliveries: flags.maxDeliveries,
      log: logger,
      tracer: otelTracer(),
    },
    { model: queue, task },
    fail,
  );
}
