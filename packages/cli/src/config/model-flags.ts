// The `microbatch serve` flags a `--config` file replaces (read by `program.ts` without reading the config code).
/**
 * The flags that configure the model itself: with `--config` they are the file's, per model, and given on the
 * command line they are refused, naming them (commander's attribute names).
 *
 * @example
 * ```ts
 * MODEL_FLAGS.includes('workers'); // true
 * ```
 */
export const MODEL_FLAGS = [
  'model',
  'task',
  'scheduling',
  'dtype',
  'maxBatchSize',
  'maxSequences',
  'maxStepTokens',
  'prefixCacheMb',
  'batchWaitMs',
  'maxLatencyMs',
  'maxQueueSize',
  'workers',
  'threads',
  'executionProvider',
  'maxBatchCost',
  'pooling',
  'normalize',
  'truncatableDimensions',
  'readiness',
] as const;

/** The `microbatch worker` flags a `--config` file replaces: each model's runner and pool settings. */
export const WORKER_MODEL_FLAGS = [
  'model',
  'task',
  'maxBatchCost',
  'scheduling',
  'dtype',
  'maxSequences',
  'maxStepTokens',
  'prefixCacheMb',
  'workers',
  'threads',
  'executionProvider',
] as const;
