// Today's `microbatch serve` flags as a one-model config: the shorthand of a `--config` file with one model, so a
// model's settings become what runs in one place (`model-options.ts`) whichever way they were given.
import { basename } from 'node:path';
import type { ServeFlags } from '../program.js';
import type { ModelConfig } from './config-schema.js';

/**
 * The one model the flags describe, named as today's apps name it (its folder's name), its folder resolved (`dir`).
 *
 * @example
 * ```ts
 * flagsModelConfig(flags, '/abs/models/tinystories-656k').name; // 'tinystories-656k'
 * ```
 */
export function flagsModelConfig(flags: ServeFlags, dir: string): ModelConfig {
  const common = {
    name: basename(dir),
    path: dir,
    dtype: flags.dtype,
    maxBatchSize: flags.maxBatchSize,
    batchWaitTimeoutMs: flags.batchWaitMs,
    maxLatencyMs: flags.maxLatencyMs,
    maxQueueSize: flags.maxQueueSize,
    workers: flags.workers,
    threads: flags.threads,
    executionProvider: flags.executionProvider,
  };
  if (flags.task === 'feature-extraction') {
    return {
      ...common,
      task: 'feature-extraction',
      maxBatchCost: flags.maxBatchCost,
      pooling: flags.pooling,
      normalize: flags.normalize === undefined ? undefined : flags.normalize === 'on',
      truncatableDimensions: flags.truncatableDimensions,
    };
  }
  return {
    ...common,
    task: 'text-generation',
    scheduling: flags.scheduling,
    maxSequences: flags.maxSequences,
    maxStepTokens: flags.maxStepTokens,
    prefixCacheMb: flags.prefixCacheMb,
  };
}
