// What `createTextCompletionModel` accepts, and its checks: the options, the ones that mean something under one
// scheduling only, and the batcher options layered over core's defaults and the pool's needs (a conflict is a
// `TypeError` naming both values, never a silent replacement).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEFAULTS } from '@microbatch/core';
import { dropUndefined } from '@microbatch/core/util';
import type {
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationLimits,
  TextGenerationOutput,
  WorkerPool,
} from '@microbatch/inference';
import type { LogLine, Logger } from './batch-log.js';

/**
 * Options of {@link createTextCompletionModel}.
 *
 * @example
 * ```ts
 * const options: TextCompletionModelOptions = { model: 'models/tinystories-656k', maxSequences: 16, maxLatencyMs: 1500 };
 * ```
 */
export interface TextCompletionModelOptions {
  /** The model folder, in transformers.js layout (`config.json`, `tokenizer.json`, `onnx/model.onnx`). */
  readonly model: string;
  /**
   * The name responses report as `model`.
   * @default the folder's name
   */
  readonly id?: string;
  /**
   * `'request'` scheduling: the most requests one batch (one generate call) holds. Not with `'continuous'`, where
   * the batcher hands the decode loop one request at a time (its batch size is 1 by construction): passing it there
   * is a `TypeError` naming `maxSequences`, the loop's own bound.
   * @default 8 (core's `DEFAULTS.maxBatchSize`)
   */
  readonly maxBatchSize?: number;
  /**
   * `'continuous'` scheduling: the most sequences one worker decodes together (the decode loop's rows); more wait
   * in the batcher. Not with `'request'` (a `TypeError` naming `maxBatchSize`).
   * @default the runner's own (32, see `@microbatch/inference`'s text-generation runner)
   */
  readonly maxSequences?: number;
  /**
   * `'continuous'` scheduling: the most tokens one decode-loop iteration runs (its rows' decode tokens plus prefill
   * chunks); longer prompts are prefilled in chunks, running streams advance at every step. Not with `'request'`.
   * @default the runner's own (64, or twice `maxSequences` when that is more)
   */
  readonly maxStepTokens?: number;
  /**
   * `'continuous'` scheduling: each worker's prefix KV cache, in MiB (0: none). Not with `'request'`.
   * @default the runner's own (64)
   */
  readonly prefixCacheMb?: number;
  /**
   * How requests share the model (see `@microbatch/inference`): `'continuous'` joins each request to the worker's
   * running decode loop at its next step and answers it the step it finishes; `'request'` runs each batch as one
   * generate call until its longest request ends.
   * @default 'continuous'
   */
  readonly scheduling?: 'continuous' | 'request';
  /**
   * `'request'` scheduling: how long the first request of a batch waits for company, in ms. 0 is work-conserving:
   * a batch goes as soon as a worker is free, with whatever is waiting (see core's `batchWaitTimeoutMs`). With
   * `'continuous'` a batch is one request and leaves at once, so a value above 0 is a `TypeError`.
   * @default 0
   */
  readonly batchWaitTimeoutMs?: number;
  /**
   * Latency-aware admission: a request whose predicted completion (the work queued ahead of it, from the batchers'
   * running estimate of batch time) exceeds this many ms is refused at once with 503 `OVERLOADED` and a
   * `Retry-After`, instead of waiting in a queue it cannot leave in time.
   * @default Infinity
   */
  readonly maxLatencyMs?: number;
  /**
   * The most requests waiting per batcher; one more is refused at once with 503 `QUEUE_FULL` + `Retry-After`.
   * @default 1024
   */
  readonly maxQueueSize?: number;
  /**
   * Worker threads, each with its own copy of the model.
   * @default 1
   */
  readonly workers?: number;
  /**
   * onnxruntime intra-op threads per worker.
   * @default 1
   */
  readonly threads?: number;
  /**
   * onnxruntime execution provider.
   * @default 'cpu'
   */
  readonly executionProvider?: string;
  /** Bounds on prompts and `max_tokens`; see `TextGenerationLimits`. */
  readonly limits?: TextGenerationLimits;
  /**
   * Where the one-line-per-batch log goes; `false` turns it off.
   * @default console.log
   */
  readonly log?: LogLine | false;
  /**
   * A pino-compatible logger (pino, Fastify's `app.log`): batches and refusals are logged to it as fields
   * (`{ batcher, batchId, batchSize, queueWaitMs, maxQueueWaitMs, executionMs, failed }`, "batch") instead of lines.
   * Takes precedence over `log`.
   */
  readonly logger?: Logger;
}

/** The batcher settings a user may pass to {@link createTextCompletionModel}. */
export interface UserBatcherOptions {
  readonly maxBatchSize?: number;
  readonly batchWaitTimeoutMs?: number;
  readonly maxLatencyMs?: number;
  readonly maxQueueSize?: number;
}

/** Options that mean something under one scheduling only: one set under the other is refused, naming it. */
export function checkScheduledOptions(scheduling: 'continuous' | 'request', options: TextCompletionModelOptions): void {
  if (scheduling === 'request' && options.maxSequences !== undefined) {
    throw new TypeError(
      `\`maxSequences\` (${String(options.maxSequences)}) bounds the decode loop of 'continuous' scheduling; with ` +
        "'request' scheduling set `maxBatchSize`, the most requests one batch holds",
    );
  }
  for (const key of ['maxStepTokens', 'prefixCacheMb'] as const) {
    if (scheduling === 'request' && options[key] !== undefined) {
      throw new TypeError(
        `\`${key}\` (${String(options[key])}) bounds the decode loop of 'continuous' scheduling; with 'request' ` +
          'scheduling no loop runs',
      );
    }
  }
  if (scheduling === 'continuous' && options.batchWaitTimeoutMs !== undefined && options.batchWaitTimeoutMs !== 0) {
    throw new TypeError(
      `\`batchWaitTimeoutMs\` (${String(options.batchWaitTimeoutMs)}) has no effect with 'continuous' scheduling: ` +
        'each request joins the decode loop at its next step, without waiting for company',
    );
  }
}

/**
 * The batcher options: the user's on top of the pool's, with the library defaults under both. A user's setting that
 * the pool needs otherwise is a `TypeError` naming both values: a lower layer never replaces it in silence.
 */
export function mergeBatcherOptions(
  user: UserBatcherOptions,
  pool: WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>['batcherOptions'],
  scheduling: 'continuous' | 'request',
): UserBatcherOptions & typeof pool {
  const defined: Record<string, unknown> = dropUndefined({ ...user });
  for (const [key, value] of Object.entries(pool)) {
    if (!(key in defined) || defined[key] === value) continue;
    const hint =
      scheduling === 'continuous' && key === 'maxBatchSize'
        ? "; 'continuous' scheduling hands the decode loop one request at a time: set `maxSequences` for its rows"
        : '';
    throw new TypeError(
      `\`${key}\`: you passed ${String(defined[key])}, the worker pool needs ${String(value)} ` +
        `(pool.batcherOptions, ${scheduling} scheduling)${hint}`,
    );
  }
  return {
    maxBatchSize: DEFAULTS.maxBatchSize,
    batchWaitTimeoutMs: DEFAULTS.batchWaitTimeoutMs,
    maxLatencyMs: DEFAULTS.maxLatencyMs,
    maxQueueSize: DEFAULTS.maxQueueSize,
    ...pool,
    ...defined,
  };
}

// What transformers.js reads first: a wrong path fails here, naming it, instead of deep inside the tokenizer.
const MODEL_FILES = ['config.json', 'tokenizer.json'];

export function checkModelFolder(model: string): void {
  const dir = resolve(model);
  if (!existsSync(dir)) throw new Error(`Model folder not found: ${dir}`);
  const missing = MODEL_FILES.filter((file) => !existsSync(join(dir, file)));
  if (missing.length > 0) {
    throw new Error(`${dir} is not a transformers.js model folder: it has no ${missing.join(' or ')}`);
  }
}
