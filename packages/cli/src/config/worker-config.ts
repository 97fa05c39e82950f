// `microbatch worker --config FILE`: one worker process serving several text-generation models, each model's pool
// pulling from a queue of its own, named after the model (`name`), where the web replicas of the same file
// (`serve --queue URL --config FILE`) put that model's requests.
import { availableParallelism } from 'node:os';
import { dirname, isAbsolute, resolve } from 'node:path';
import { existsSync } from 'node:fs';
import { otelTracer } from '@microbatch/core/otel';
import { dropUndefined } from '@microbatch/core/util';
import { createWorkerPool, textGenerationBatchKey, textGenerationResume } from '@microbatch/inference';
import { TEXT_COMPLETION_HANDLERS, planThreads } from '@microbatch/serving';
import { exitOnSignals } from '../lifecycle.js';
import { createLogger } from '../logger.js';
import { resolveModelDir } from '../model-dir.js';
import type { WorkerFlags } from '../program.js';
import { loadTransport, startQueueWorker } from '../queue-transport.js';
import { readServeConfig } from './config-file.js';

/**
 * Runs `microbatch worker --config FILE` until SIGTERM / SIGINT (which finish and answer every model's running
 * batches). The file is checked as `serve --config` checks it; its models must all be text-generation ones (the
 * queue carries text generation only), and their threads must fit the machine's cores.
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
  const other = config.models.find((model) => model.task !== 'text-generation');
  if (other !== undefined) {
    fail(
      `${file}: model ${JSON.stringify(other.name)} is ${other.task}: a queue worker serves text-generation models only`,
    );
  }
  const plan = planThreads(
    config.models.map((model) => ({ name: model.name, workers: model.workers ?? 1, threads: model.threads ?? 1 })),
    config.maxThreads ?? availableParallelism(),
  );
  if (!plan.fits) fail(`thread over-commit: the models need ${plan.summary}. Lower a model's workers or threads`);
  const dirs: string[] = [];
  for (const [index, model] of config.models.entries()) {
    await loadTransport(flags.queue, model.name, fail);
    const near = isAbsolute(model.path) ? model.path : resolve(dirname(file), model.path);
    try {
      dirs.push(await resolveModelDir(existsSync(near) ? near : model.path, { modelsDir: flags.modelsDir }));
    } catch (error) {
      fail(`${file}: models[${index}].path (${model.name}): ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  const logger = createLogger(flags.logFormat);
  logger.info(
    { config: file, models: config.models.map((model) => model.name) },
    `microbatch worker: threads: ${plan.summary}`,
  );
  const pools = config.models.map((model, index) => {
    const runner = {
      task: 'text-generation',
      model: dirs[index] as string,
      scheduling: model.scheduling ?? 'continuous',
      dtype: model.dtype ?? 'auto',
      ...dropUndefined({
        maxSequences: model.maxSequences,
        maxStepTokens: model.maxStepTokens,
        prefixCacheMb: model.prefixCacheMb,
      }),
    } as const;
    return createWorkerPool({
      runner,
      ...dropUndefined({ size: model.workers, threads: model.threads, executionProvider: model.executionProvider }),
    });
  });
  const closePools = () => Promise.all(pools.map((pool) => pool.close()));
  try {
    await Promise.all(pools.map((pool) => pool.ready));
  } catch (error) {
    await closePools();
    fail(error instanceof Error ? error.message : String(error));
  }
  const workers: Awaited<ReturnType<typeof startQueueWorker>>[] = [];
  for (const [index, model] of config.models.entries()) {
    const pool = pools[index] as (typeof pools)[number];
    workers.push(
      await startQueueWorker(
        flags.queue,
        model.name,
        {
          handlers: { [TEXT_COMPLETION_HANDLERS.generate]: pool.handler },
          streamingHandlers: { [TEXT_COMPLETION_HANDLERS.stream]: pool.streamingHandler },
          batchKey: pool.scheduling === 'request' ? textGenerationBatchKey : undefined,
          resumable: pool.scheduling === 'continuous' ? textGenerationResume : undefined,
          // Entries per pull and the wait to top a pull up: the flags, the same for every model's queue.
          maxBatchSize: flags.maxBatchSize,
          concurrency: pool.scheduling === 'continuous' ? 2 * pool.size : pool.size,
          batchWaitTimeoutMs: flags.batchWaitMs,
          claimIdleMs: flags.claimIdleMs,
          maxDeliveries: flags.maxDeliveries,
          log: logger,
          tracer: otelTracer(),
        },
        fail,
      ),
    );
  }
  exitOnSignals(
    async () => {
      await Promise.all(workers.map((worker) => worker.close()));
      await closePools();
    },
    { log: logger },
  );
  for (const [index, worker] of workers.entries()) {
    await worker.ready;
    logger.info({ worker: worker.workerId, model: config.models[index]?.name }, 'worker ready');
  }
}
