import { basename } from 'node:path';
import type {
  ListenOptions,
  RunningServer,
  TextCompletionAppOptions,
  TextCompletionService,
} from '@microbatch/serving';
import { createRedisQueue } from '@microbatch/redis';
import { createQueuedTextCompletionService, createTextCompletionModel } from '@microbatch/serving';
import { serveUntilSignal } from './lifecycle.js';
import { serveEmbeddings } from './serve-embeddings.js';
import { createLogger } from './logger.js';
import { queueName, resolveModelDir } from './model-dir.js';
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
  if (flags.task === 'feature-extraction') return serveEmbeddings(flags, fail);
  if (flags.queue !== undefined) return serveFromQueue(flags, flags.queue);
  let model: string;
  try {
    model = await resolveModelDir(flags.model, { modelsDir: flags.modelsDir });
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  const { startTextCompletionApp } = await APPS[flags.framework]();
  const { maxBatchSize, batchWaitMs, maxLatencyMs, maxQueueSize, workers, threads, executionProvider, scheduling } =
    flags;
  const logger = createLogger(flags.logFormat);
  logger.info(
    {
      model: basename(model),
      task: flags.task,
      framework: flags.framework,
      maxBatchSize,
      batchWaitMs,
      maxLatencyMs: maxLatencyMs ?? null,
      maxQueueSize,
      workers,
      threads,
      executionProvider,
      scheduling,
    },
    'microbatch serve',
  );
  // The app releases the model itself if it cannot listen (the workers would keep the process alive).
  await serveUntilSignal(
    (where) =>
      startTextCompletionApp(
        createTextCompletionModel({
          model,
          maxBatchSize,
          batchWaitTimeoutMs: batchWaitMs,
          maxLatencyMs,
          maxQueueSize,
          workers,
          threads,
          executionProvider,
          scheduling,
          logger,
        }),
        where,
        { logger },
      ),
    { port: flags.port, host: flags.host },
    logger,
  );
}

/**
 * `microbatch serve --queue redis://...`: a web replica with no local model. Its items go to the queue named after
 * `--model` (a folder's name, or the name itself), where workers of that model pull them, batched with every other
 * replica's. The HTTP API is the same; `/readyz` is ready while Redis is connected and a worker is alive.
 */
async function serveFromQueue(flags: ServeFlags, url: string): Promise<void> {
  const queue = queueName(flags.model);
  const logger = createLogger(flags.logFormat);
  logger.info(
    {
      model: queue,
      task: flags.task,
      framework: flags.framework,
      queue: redact(url),
      maxQueueSize: flags.maxQueueSize,
    },
    'microbatch serve (web replica)',
  );
  const { startTextCompletionApp } = await APPS[flags.framework]();
  await serveUntilSignal(
    (where) =>
      startTextCompletionApp(
        createQueuedTextCompletionService(createRedisQueue({ url, queue, maxQueueSize: flags.maxQueueSize }), {
          id: queue,
        }),
        where,
        { logger },
      ),
    { port: flags.port, host: flags.host },
    logger,
  );
}

/** A Redis URL as it may be logged: without its password. */
export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'redis://(unparsable)';
  }
}
