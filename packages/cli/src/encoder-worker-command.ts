// `microbatch worker --task feature-extraction|rerank|text-classification`: an encoder's queue worker. It loads the
// graph on worker threads and pulls the entries web replicas (`serve --task <same> --queue`) tokenized and queued,
// from the queue named after the model, as a text-generation worker does.
import { otelTracer } from '@microbatch/core/otel';
import { dropUndefined } from '@microbatch/core/util';
import { type EncoderTask, type EncoderWorker, createEncoderWorker } from '@microbatch/serving';
import { exitOnSignals } from './lifecycle.js';
import { createLogger } from './logger.js';
import { queueName, resolveModelDir } from './model-dir.js';
import { loadTransport, redact, startQueueWorker } from './queue-transport.js';
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
  let model: string;
  try {
    model = await resolveModelDir(flags.model, { modelsDir: flags.modelsDir });
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  const queue = queueName(model);
  await loadTransport(flags.queue, queue, fail);
  const maxBatchSize = flags.maxBatchSize ?? DEFAULT_PULL;
  let encoder: EncoderWorker;
  try {
    encoder = createEncoderWorker({
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
    });
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
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
  try {
    await encoder.ready;
  } catch (error) {
    await encoder.close();
    fail(error instanceof Error ? error.message : String(error));
  }
  const worker = await startQueueWorker(
    flags.queue,
    queue,
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
    fail,
  );
  exitOnSignals(
    async () => {
      await worker.close();
      await encoder.close();
    },
    { log: logger },
  );
  await worker.ready;
  logger.info({ worker: worker.workerId, model: queue, task }, 'worker ready');
}
