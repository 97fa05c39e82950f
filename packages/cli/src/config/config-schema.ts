// What a `microbatch serve --config` file may say: its top-level keys and each model's, with the check of each
// value and the tasks a key applies to. One table, read by the file's validation (`config-file.ts`) and by the
// conversion of today's flags into a one-model config (`flags-config.ts`).
import { DTYPE_CHOICES, SCHEDULINGS } from '@microbatch/inference';
import { MODEL_TASK_NAMES, type ModelTask } from '@microbatch/serving';

/**
 * One model of a config file, with the library's option names (`batchWaitTimeoutMs`, not the flag's `--batch-wait-ms`).
 *
 * @example
 * ```ts
 * const chat: ModelConfig = { name: 'chat', path: 'models/tinystories-656k', task: 'text-generation' };
 * ```
 */
export interface ModelConfig {
  /** The `model` requests name it by, and its `id` in `/v1/models`. */
  readonly name: string;
  /** A model folder (relative to the config file) or a hub id already under `modelsDir`. */
  readonly path: string;
  readonly task: ModelTask;
  /** @default 'eager', or 'lazy' under `maxLoadedModels` */
  readonly load?: 'eager' | 'lazy';
  readonly dtype?: (typeof DTYPE_CHOICES)[number];
  readonly workers?: number;
  readonly threads?: number;
  readonly executionProvider?: string;
  readonly scheduling?: (typeof SCHEDULINGS)[number];
  readonly maxBatchSize?: number;
  readonly batchWaitTimeoutMs?: number;
  readonly maxSequences?: number;
  readonly maxStepTokens?: number;
  readonly prefixCacheMb?: number;
  readonly maxLatencyMs?: number;
  readonly maxQueueSize?: number;
  readonly maxBatchCost?: number;
  readonly pooling?: 'mean' | 'cls' | 'last_token';
  readonly normalize?: boolean;
  readonly truncatableDimensions?: boolean;
}

/**
 * A checked `microbatch serve --config` file.
 *
 * @example
 * ```ts
 * const config: ServeConfig = { models: [chat, embedder], maxLoadedModels: 1 };
 * ```
 */
export interface ServeConfig {
  readonly models: readonly ModelConfig[];
  /** All models' worker threads x onnxruntime threads, together (`--max-threads` wins). @default the cores */
  readonly maxThreads?: number;
  /** The most models loaded at once (`--max-loaded-models` wins). @default every model */
  readonly maxLoadedModels?: number;
}

/** A value's check: the problem, or `undefined` when it is fine. */
type Check = (value: unknown) => string | undefined;

const integer =
  (min: number): Check =>
  (value) =>
    Number.isInteger(value) && (value as number) >= min ? undefined : `must be an integer >= ${min}`;
const number =
  (min: number, exclusive = false): Check =>
  (value) =>
    typeof value === 'number' && Number.isFinite(value) && (exclusive ? value > min : value >= min)
      ? undefined
      : `must be a number ${exclusive ? '>' : '>='} ${min}`;
const oneOf =
  (choices: readonly string[]): Check =>
  (value) =>
    typeof value === 'string' && choices.includes(value) ? undefined : `must be one of ${choices.join(', ')}`;
const text: Check = (value) =>
  typeof value === 'string' && value.trim() !== '' ? undefined : 'must be a non-empty string';
const boolean: Check = (value) => (typeof value === 'boolean' ? undefined : 'must be true or false');
// A name goes in URLs, logs and metric labels: printable, no spaces.
const modelName: Check = (value) =>
  typeof value === 'string' && /^[\w.:/-]{1,128}$/.test(value)
    ? undefined
    : 'must be 1 to 128 letters, digits, `_`, `.`, `:`, `/` or `-`';

interface KeyRule {
  readonly check: Check;
  readonly required?: true;
  /** The tasks the key means something for; absent: every task. */
  readonly tasks?: readonly ModelTask[];
}

/**
 * Each model's keys.
 *
 * @example
 * ```ts
 * MODEL_KEYS.maxSequences.tasks; // ['text-generation']
 * ```
 */
export const MODEL_KEYS: Readonly<Record<keyof ModelConfig, KeyRule>> = {
  name: { check: modelName, required: true },
  path: { check: text, required: true },
  task: { check: oneOf(MODEL_TASK_NAMES), required: true },
  load: { check: oneOf(['eager', 'lazy']) },
  dtype: { check: oneOf(DTYPE_CHOICES) },
  workers: { check: integer(1) },
  threads: { check: integer(1) },
  executionProvider: { check: text },
  scheduling: { check: oneOf(SCHEDULINGS), tasks: ['text-generation'] },
  maxBatchSize: { check: integer(1) },
  batchWaitTimeoutMs: { check: number(0) },
  maxSequences: { check: integer(1), tasks: ['text-generation'] },
  maxStepTokens: { check: integer(2), tasks: ['text-generation'] },
  prefixCacheMb: { check: number(0), tasks: ['text-generation'] },
  maxLatencyMs: { check: number(0, true) },
  maxQueueSize: { check: integer(1) },
  maxBatchCost: { check: integer(1), tasks: ['feature-extraction', 'rerank', 'text-classification'] },
  pooling: { check: oneOf(['mean', 'cls', 'last_token']), tasks: ['feature-extraction'] },
  normalize: { check: boolean, tasks: ['feature-extraction'] },
  truncatableDimensions: { check: boolean, tasks: ['feature-extraction'] },
};

/**
 * The file's top-level keys.
 *
 * @example
 * ```ts
 * Object.keys(CONFIG_KEYS); // ['models', 'maxThreads', 'maxLoadedModels']
 * ```
 */
export const CONFIG_KEYS: Readonly<Record<keyof ServeConfig, KeyRule>> = {
  models: {
    check: (value) => (Array.isArray(value) && value.length > 0 ? undefined : 'must be a non-empty list of models'),
    required: true,
  },
  maxThreads: { check: integer(1) },
  maxLoadedModels: { check: integer(1) },
};
