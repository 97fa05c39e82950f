// `microbatch serve --queue URL --config FILE`: a web replica of several models, each request routed by its
// `model` to that model's queue (named after it), where `microbatch worker --queue URL --config FILE` pulls. The
// replica loads no model: of each model it reads `name`, `task`, `maxLatencyMs` and `maxQueueSize`; the runner keys
// are the workers'.
import { checkDeadlineFits } from '@microbatch/core/http';
import { otelTracer } from '@microbatch/core/otel';
import {
  type Logger,
  type ModelDefinition,
  type ModelRegistry,
  type TextCompletionService,
  createModelRegistry,
  createQueuedTextCompletionService,
} from '@microbatch/serving';
import { brokerOf, loadTransport, openQueue } from '../queue-transport.js';
import type { ServeFlags } from '../program.js';
import type { ServeConfig } from './config-schema.js';

/**
 * Opens one queue per model of `config` and returns the registry of their queued services (all loaded: a replica
 * holds no model, so there is nothing to multiplex). Text-generation models only.
 *
 * @example
 * ```ts
 * const registry = await queuedRegistry(flags, url, config, logger, fail);
 * ```
 */
export async function queuedRegistry(
  flags: ServeFlags,
  url: string,
  config: ServeConfig,
  logger: Logger,
  fail: (message: string) => never,
): Promise<ModelRegistry> {
  const other = config.models.find((model) => model.task !== 'text-generation');
  if (other !== undefined) {
    fail(`model ${JSON.stringify(other.name)} is ${other.task}: a web replica serves text-generation models only`);
  }
  const services: TextCompletionService[] = [];
  for (const model of config.models) {
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
    services.push(createQueuedTextCompletionService(queue, { id: model.name, maxLatencyMs: model.maxLatencyMs }));
  }
  const definitions = config.models.map((model, index): ModelDefinition => ({
    name: model.name,
    task: 'text-generation',
    load: 'eager',
    create: () => services[index] as TextCompletionService,
  }));
  return createModelRegistry(definitions, { logger });
}
