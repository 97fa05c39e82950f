// `microbatch serve --queue URL --config FILE`: a web replica of several models, each request routed by its
// `model` to that model's queue (named after it), where `microbatch worker --queue URL --config FILE` pulls. The
// replica loads no model: of each model it reads `name`, `task`, `maxLatencyMs` and `maxQueueSize` (and, for
// embeddings, `pooling`, `normalize`, `truncatableDimensions`); an encoder's folder is read for its tokenizer and
// `config.json` only (requests are tokenized and bounded here); the runner keys are the workers'.
import { DEFAULTS } from '@microbatch/core';
import { checkDeadlineFits } from '@microbatch/core/http';
import { otelTracer } from '@microbatch/core/otel';
import {
  type Logger,
  type ModelDefinition,
  type ModelRegistry,
  createModelRegistry,
  createQueuedEmbeddingService,
  createQueuedSequenceClassifier,
  createQueuedTextCompletionService,
} from '@microbatch/serving';
import { brokerOf, loadTransport, openQueue } from '../queue-transport.js';
import type { ServeFlags } from '../program.js';
import type { ModelConfig, ServeConfig } from './config-schema.js';
import { configModelDir } from './model-paths.js';

type Queue = Awaited<ReturnType<typeof openQueue>>;

/** A model's queued service, as the registry holds it (all eager: nothing to load). */
function queuedDefinition(model: ModelConfig, queue: Queue, dir: string | undefined): ModelDefinition {
  const { name, maxLatencyMs } = model;
  const common = { name, load: 'eager' } as const;
  switch (model.task) {
    case 'text-generation': {
      const service = createQueuedTextCompletionService(queue, { id: name, maxLatencyMs });
      return { ...common, task: model.task, create: () => service };
    }
    case 'feature-extraction': {
      const service = createQueuedEmbeddingService(queue, {
        model: dir as string,
        id: name,
        maxLatencyMs,
        pooling: model.pooling,
        normalize: model.normalize,
        truncatableDimensions: model.truncatableDimensions,
      });
      return { ...common, task: model.task, create: () => service };
    }
    default: {
      const service = createQueuedSequenceClassifier(queue, {
        model: dir as string,
        id: name,
        task: model.task,
        maxLatencyMs,
        maxQueueSize: model.maxQueueSize ?? DEFAULTS.maxQueueSize,
      });
      return { ...common, task: model.task, create: () => service };
    }
  }
}

/**
 * Opens one queue per model of `config` and returns the registry of their queued services (all loaded: a replica
 * holds no model, so there is nothing to multiplex).
 *
 * @example
 * ```ts
 * const registry = await queuedRegistry({ ...flags, config: 'models.yaml' }, url, config, logger, fail);
 * ```
 */
export async function queuedRegistry(
  flags: ServeFlags & { readonly config: string },
  url: string,
  config: ServeConfig,
  logger: Logger,
  fail: (message: string) => never,
): Promise<ModelRegistry> {
  // An encoder's folder is needed here (its tokenizer): checked for every model before any queue opens.
  const dirs: (string | undefined)[] = [];
  for (const [index, model] of config.models.entries()) {
    dirs.push(
      model.task === 'text-generation'
        ? undefined
        : await configModelDir(flags.config, model, index, flags.modelsDir, fail),
    );
  }
  const definitions: ModelDefinition[] = [];
  for (const [index, model] of config.models.entries()) {
    await loadTransport(url, model.name, fail);
    const queue = await openQueue(
      url,
      model.name,
      {
        maxQueueSize: model.maxQueueSize,
        workerGraceMs: flags.workerGraceMs,
        onStatus: (status) => logger.info({ model: model.name, broker: brokerOf(url), ...status }, 'queue status'),
        tracer: otelTracer(),
      },
      fail,
    );
    checkDeadlineFits(queue.timeoutMs);
    try {
      definitions.push(queuedDefinition(model, queue, dirs[index]));
    } catch (error) {
      fail(
        `${flags.config}: model ${JSON.stringify(model.name)}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  return createModelRegistry(definitions, { logger });
}
