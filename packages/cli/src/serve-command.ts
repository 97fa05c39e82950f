import { basename } from 'node:path';
import { type RunningServer, type TextCompletionServerOptions, serveUntilSignal } from '@microbatch/serving';
import { resolveModelDir } from './model-dir.js';
import type { ServeFlags } from './program.js';

type Start = (options: TextCompletionServerOptions) => Promise<RunningServer>;

// The apps are the examples themselves, loaded on demand: `--framework express` never loads NestJS.
const APPS: Record<ServeFlags['framework'], () => Promise<{ start: Start }>> = {
  express: () => import('express-text-completion'),
  koa: () => import('koa-text-completion'),
  nest: () => import('nest-text-completion'),
};

/**
 * Runs `microbatch serve`: checks the model directory (a clear error at once if it is missing), starts the chosen
 * example app on it, and serves until SIGTERM / SIGINT, which drain the requests in flight and exit 0. A model that
 * fails to load prints why and exits 1.
 *
 * @example
 * ```ts
 * await serveCommand({ ...flags, model: 'models/tinystories-656k', framework: 'koa' });
 * ```
 */
export async function serveCommand(flags: ServeFlags, fail: (message: string) => never): Promise<void> {
  let model: string;
  try {
    model = await resolveModelDir(flags.model, { modelsDir: flags.modelsDir });
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  const { start } = await APPS[flags.framework]();
  const { maxBatchSize, batchWaitMs, workers, threads, executionProvider } = flags;
  console.log(
    `microbatch serve: ${basename(model)} (${flags.task}) on ${flags.framework}, max batch size ${maxBatchSize}, ` +
      `batch wait ${batchWaitMs} ms, ${workers} worker(s) x ${threads} thread(s), ${executionProvider}`,
  );
  await serveUntilSignal(
    (where) => start({ ...where, model, maxBatchSize, batchWaitTimeoutMs: batchWaitMs, workers, threads, executionProvider }),
    { port: flags.port, host: flags.host },
  );
}
