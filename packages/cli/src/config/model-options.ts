// A config file's model as the options of serving's model factories: the one place a model's settings become what
// runs, for a `--config` file and for today's flags alike (`flags-config.ts` turns them into a one-model config).
import type {
  EmbeddingModelOptions,
  Logger,
  SequenceClassifierOptions,
  TextCompletionModelOptions,
} from '@microbatch/serving';
import type { ModelConfig } from './config-schema.js';

/**
 * `createTextCompletionModel`'s options for a text-generation model of the config, its folder resolved (`dir`).
 *
 * @example
 * ```ts
 * createTextCompletionModel(textModelOptions(model, '/abs/models/tinystories-656k', logger));
 * ```
 */
export function textModelOptions(model: ModelConfig, dir: string, logger: Logger): TextCompletionModelOptions {
  return {
    id: model.name,
    model: dir,
    scheduling: model.scheduling ?? 'continuous',
    dtype: model.dtype ?? 'auto',
    maxBatchSize: model.maxBatchSize,
    maxSequences: model.maxSequences,
    maxStepTokens: model.maxStepTokens,
    prefixCacheMb: model.prefixCacheMb,
    batchWaitTimeoutMs: model.batchWaitTimeoutMs,
    maxLatencyMs: model.maxLatencyMs,
    maxQueueSize: model.maxQueueSize,
    workers: model.workers,
    threads: model.threads,
    executionProvider: model.executionProvider,
    logger,
  };
}

/**
 * `createEmbeddingModel`'s options for a feature-extraction model of the config, its folder resolved (`dir`).
 *
 * @example
 * ```ts
 * createEmbeddingModel(embeddingModelOptions(model, '/abs/models/minilm', logger));
 * ```
 */
export function embeddingModelOptions(model: ModelConfig, dir: string, logger: Logger): EmbeddingModelOptions {
  return {
    id: model.name,
    model: dir,
    dtype: model.dtype ?? 'auto',
    maxBatchSize: model.maxBatchSize,
    maxBatchCost: model.maxBatchCost,
    batchWaitTimeoutMs: model.batchWaitTimeoutMs,
    maxLatencyMs: model.maxLatencyMs,
    maxQueueSize: model.maxQueueSize,
    workers: model.workers,
    threads: model.threads,
    executionProvider: model.executionProvider,
    pooling: model.pooling,
    normalize: model.normalize,
    truncatableDimensions: model.truncatableDimensions,
    logger,
  };
}

/**
 * `createSequenceClassifier`'s options for a `rerank` or `text-classification` model of the config, its folder
 * resolved (`dir`): the settings `serve --task rerank | text-classification` takes from its flags.
 *
 * @example
 * ```ts
 * createSequenceClassifier(classifierModelOptions(model, '/abs/models/ms-marco-MiniLM-L-6-v2', logger));
 * ```
 */
export function classifierModelOptions(
  model: ModelConfig & { readonly task: 'rerank' | 'text-classification' },
  dir: string,
  logger: Logger,
): SequenceClassifierOptions {
  return {
    id: model.name,
    model: dir,
    task: model.task,
    dtype: model.dtype ?? 'auto',
    maxBatchSize: model.maxBatchSize,
    maxBatchCost: model.maxBatchCost,
    batchWaitTimeoutMs: model.batchWaitTimeoutMs,
    maxLatencyMs: model.maxLatencyMs,
    maxQueueSize: model.maxQueueSize,
    workers: model.workers,
    threads: model.threads,
    executionProvider: model.executionProvider,
    logger,
  };
}
