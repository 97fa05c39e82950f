// `microbatch serve --config FILE`: several models in one process behind one app, each request routed by its
// `model`. The file is checked whole before anything starts (keys, values, names, paths, the thread budget); the
// start-up log shows the thread plan; then the eager models load while the server listens.
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, isAbsolute, resolve } from 'node:path';
import type {
  ListenOptions,
  Logger,
  ModelDefinition,
  ModelRegistry,
  MultiModelAppOptions,
  RunningServer,
} from '@microbatch/serving';
import {
  createEmbeddingModel,
  createModelRegistry,
  createSequenceClassifier,
  createTextCompletionModel,
  planThreads,
} from '@microbatch/serving';
import { checkDeadlineFits } from '@microbatch/core/http';
import { dropUndefined } from '@microbatch/core/util';
import { GRAPH_NAMES, findModelFile } from '@microbatch/inference';
import { serveUntilSignal } from '../lifecycle.js';
import { loadAccess } from '../access-flags.js';
import { loadFramework } from '../load-framework.js';
import { createLogger } from '../logger.js';
import { resolveModelDir } from '../model-dir.js';
import type { ServeFlags } from '../program.js';
import { defaultLoad, readServeConfig } from './config-file.js';
import type { ServeConfig } from './config-schema.js';
import { queuedRegistry } from './serve-config-queue.js';
import { brokerOf } from '../queue-transport.js';
import { classifierModelOptions, embeddingModelOptions, textModelOptions } from './model-options.js';

type StartApp = (
  registry: ModelRegistry,
  where: ListenOptions,
  options?: MultiModelAppOptions,
) => Promise<RunningServer>;

// Loaded on demand, as for one model: `--framework express` never loads NestJS.
const APPS: Record<ServeFlags['framework'], () => Promise<{ startMultiModelApp: StartApp }>> = {
  express: () => import('@microbatch/serving/express'),
  koa: () => import('@microbatch/serving/koa'),
  fastify: () => import('@microbatch/serving/fastify'),
  hono: () => import('@microbatch/serving/hono'),
  nest: () => import('@microbatch/serving/nest'),
};

/** `logger` with every line naming `model`, so each model's batch and refusal logs say whose they are. */
function withModel(logger: Logger, model: string): Logger {
  return {
    info: (fields, message) => logger.info({ model, ...fields }, message),
    warn: (fields, message) => logger.warn({ model, ...fields }, message),
    error: (fields, message) => logger.error({ model, ...fields }, message),
  };
}

/**
 * Runs `microbatch serve --config FILE` until SIGTERM / SIGINT. A bad file, a missing model folder or a thread plan
 * over `--max-threads` prints the problem and exits 1 before anything loads.
 *
 * @example
 * ```ts
 * await serveConfig({ ...flags, config: 'models.yaml' }, fail);
 * ```
 */
export async function serveConfig(
  flags: ServeFlags & { readonly config: string },
  fail: (message: string) => never,
): Promise<void> {
  const file = flags.config;
  const loadApp = APPS[flags.framework];
  let config;
  try {
    config = await readServeConfig(file);
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  if (flags.queue !== undefined) return serveReplica(flags, flags.queue, config, loadApp, fail);
  const maxThreads = flags.maxThreads ?? config.maxThreads ?? availableParallelism();
  const maxLoadedModels = flags.maxLoadedModels ?? config.maxLoadedModels;
  if (maxLoadedModels !== undefined && flags.maxLoadedModels !== undefined) {
    const eager = config.models.filter((model) => model.load === 'eager');
    if (eager.length > maxLoadedModels) {
      fail(
        `--max-loaded-models ${maxLoadedModels}: ${file} loads ${eager.length} models eagerly (${eager.map((model) => model.name).join(', ')})`,
      );
    }
  }
  const dirs: string[] = [];
  for (const [index, model] of config.models.entries()) {
    // Relative to the file when there; else as given (a hub id under --models-dir, or relative to the cwd).
    const near = isAbsolute(model.path) ? model.path : resolve(dirname(file), model.path);
    try {
      const dir = await resolveModelDir(existsSync(near) ? near : model.path, { modelsDir: flags.modelsDir });
      // The weights a lazy model will load are checked now too, not at its first request.
      findModelFile(
        dir,
        model.dtype ?? 'auto',
        model.task === 'text-generation' ? GRAPH_NAMES.decoder : GRAPH_NAMES.encoder,
      );
      dirs.push(dir);
    } catch (error) {
      fail(`${file}: models[${index}].path (${model.name}): ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  const plan = planThreads(
    config.models.map((model) => ({ name: model.name, workers: model.workers ?? 1, threads: model.threads ?? 1 })),
    maxThreads,
    maxLoadedModels,
  );
  if (!plan.fits) {
    fail(
      `thread over-commit: the models need ${plan.summary}. Lower a model's workers or threads, load fewer at ` +
        'once (--max-loaded-models), or raise --max-threads',
    );
  }
  const { startMultiModelApp } = await loadFramework(flags.framework, loadApp, fail);
  const logger = createLogger(flags.logFormat);
  const access = loadAccess(flags, process.env, logger, fail);
  const load = defaultLoad({ maxLoadedModels });
  const definitions = config.models.map((model, index): ModelDefinition => {
    const dir = dirs[index] as string;
    const child = withModel(logger, model.name);
    // Requests waiting for the model to load are bounded like those waiting in its batchers.
    const shared = { name: model.name, load: model.load ?? load, ...dropUndefined({ maxWaiting: model.maxQueueSize }) };
    switch (model.task) {
      case 'feature-extraction':
        return {
          ...shared,
          task: model.task,
          create: () => createEmbeddingModel(embeddingModelOptions(model, dir, child)),
        };
      case 'rerank':
      case 'text-classification': {
        const task = model.task;
        return {
          ...shared,
          task,
          create: () => createSequenceClassifier(classifierModelOptions({ ...model, task }, dir, child)),
        };
      }
      default:
        return {
          ...shared,
          task: model.task,
          create: () => createTextCompletionModel(textModelOptions(model, dir, child)),
        };
    }
  });
  logger.info(
    {
      config: file,
      framework: flags.framework,
      models: config.models.map((model, index) => ({
        name: model.name,
        task: model.task,
        path: dirs[index],
        load: definitions[index]?.load,
        workers: model.workers ?? 1,
        threads: model.threads ?? 1,
      })),
      maxLoadedModels: maxLoadedModels ?? config.models.length,
      maxThreads,
      threadsAtPeak: plan.peak,
    },
    `microbatch serve: ${config.models.length} models; threads: ${plan.summary}`,
  );
  await serveUntilSignal(
    (where) => {
      const registry = createModelRegistry(definitions, { maxLoadedModels, logger });
      // A request waiting for its model must get its 503 before the server could close its connection.
      checkDeadlineFits(registry.loadWaitMs);
      return startMultiModelApp(registry, where, {
        ...access.options,
        sharedPrefixCache: flags.sharedPrefixCache === true,
      });
    },
    { port: flags.port, host: flags.host },
    logger,
  );
}

/** `serve --queue URL --config FILE`: a web replica of every model, each from its own queue (`serve-config-queue.ts`). */
async function serveReplica(
  flags: ServeFlags & { readonly config: string },
  url: string,
  config: ServeConfig,
  loadApp: () => Promise<{ startMultiModelApp: StartApp }>,
  fail: (message: string) => never,
): Promise<void> {
  const { startMultiModelApp } = await loadFramework(flags.framework, loadApp, fail);
  const logger = createLogger(flags.logFormat);
  logger.info(
    {
      config: flags.config,
      framework: flags.framework,
      broker: brokerOf(url),
      models: config.models.map((model) => model.name),
    },
    'microbatch serve (web replica of several models)',
  );
  await serveUntilSignal(
    async (where) =>
      startMultiModelApp(await queuedRegistry(flags, url, config, logger, fail), where, {
        ...loadAccess(flags, process.env, logger, fail).options,
        sharedPrefixCache: flags.sharedPrefixCache === true,
      }),
    { port: flags.port, host: flags.host },
    logger,
  );
}
