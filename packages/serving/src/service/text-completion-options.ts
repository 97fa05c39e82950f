// What `createTextCompletionModel` accepts, and its checks: the options, the ones that mean something under one
// scheduling only, and the batcher options layered over core's defaults and the pool's needs (a conflict is a
// `TypeError` naming both values, never a silent replacement).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEFAULTS } from '@microbatch/core';
import { dropUndefined } from '@microbatch/core/util';
import { SCHEDULING_RULES, schedulingRefusal, settingsWhere } from '@microbatch/inference';
import type {
  ModelDtype,
  Scheduling,
  SchedulingSetting,
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
  /** The model folder, in transformers.js layout (`config.json`, `tokenizer.json`, an ONNX graph under `onnx/`). */
  readonly model: string;
  /**
   * The name responses report as `model`.
   * @default the folder's name
   */
  readonly id?: string;
  /**
   * `'request'` scheduling: the most requests one batch (one generate call) holds. `'continuous'` scheduling fixes
   * it to 1 (the batcher hands the decode loop one request at a time); another value there is a `TypeError`.
   * @default 8 (core's `DEFAULTS.maxBatchSize`)
   */
  readonly maxBatchSize?: number;
  /**
   * `'continuous'` scheduling: the most sequences one worker decodes together (the decode loop's rows); more wait
   * in the batcher. Not with `'request'` (a `TypeError`).
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
   * generate call until its longest request ends. Which options each one reads is inference's `SCHEDULING_RULES`
   * (the `microbatch` flags read it too): one it does not read is a `TypeError` naming it and saying why. Left out,
   * a decoder graph without a KV cache (no `past_key_values.*` inputs) runs under `'request'` (logged once);
   * `'continuous'` given for such a graph throws an `Error` saying why.
   * @default 'continuous' (`'request'` for a graph without a KV cache)
   */
  readonly scheduling?: Scheduling;
  /**
   * Which of the folder's ONNX files the workers load, as transformers.js names them (`'q8'`:
   * `onnx/model_quantized.onnx`, `'q4'`: `onnx/model_q4.onnx`, `'fp32'`: `onnx/model.onnx` ...); `'auto'`: the first
   * present in inference's `AUTO_DTYPE_ORDER`. A dtype the folder has no file for fails the load (`ready` rejects),
   * naming the dtypes it has.
   * @default 'auto'
   */
  readonly dtype?: 'auto' | ModelDtype;
  /**
   * `'request'` scheduling: how long the first request of a batch waits for company, in ms. 0 is work-conserving:
   * a batch goes as soon as a worker is free, with whatever is waiting (see core's `batchWaitTimeoutMs`).
   * `'continuous'` scheduling fixes it to 0 (a request joins the loop at once); another value there is a `TypeError`.
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

// Which settings of the scheduling rules are options of a model in this process (a record, so a new row of the
// table is decided here): `modelsDir` is the CLI's, `workerGraceMs` a web replica's.
const IS_OPTION: Readonly<Record<SchedulingSetting, boolean>> = {
  modelsDir: false,
  scheduling: true,
  maxBatchSize: true,
  batchWaitTimeoutMs: true,
  maxSequences: true,
  maxStepTokens: true,
  prefixCacheMb: true,
  maxLatencyMs: true,
  maxQueueSize: true,
  workerGraceMs: false,
  workers: true,
  threads: true,
  executionProvider: true,
  dtype: true,
};

/**
 * Refuses an option that has no effect under `scheduling`, naming it and saying why, as inference's
 * `SCHEDULING_RULES` say (the CLI refuses the same flags from the same table). A setting continuous scheduling fixes
 * (`maxBatchSize` 1, `batchWaitTimeoutMs` 0) may be passed with exactly that value; settings a model in this process
 * does not have (`workerGraceMs`: a replica's) are not options here.
 */
export function checkScheduledOptions(scheduling: Scheduling, options: TextCompletionModelOptions): void {
  // The options named like settings are numbers or strings (the type of `IS_OPTION`'s true rows).
  const given = options as unknown as Readonly<Partial<Record<SchedulingSetting, number | string>>>;
  for (const setting of settingsWhere((rule) => !rule.serve.includes(scheduling))) {
    if (!IS_OPTION[setting]) continue;
    const value = given[setting];
    if (value === undefined || value === SCHEDULING_RULES[setting].continuousValue) continue;
    const why = schedulingRefusal(setting, `serve ${scheduling}`, (other) => `\`${other}\``);
    throw new TypeError(`\`${setting}\` (${String(value)}) has no effect with '${scheduling}' scheduling: ${why}`);
  }
}

/**
 * The scheduling-rule settings given in `options` (defined), for the scheduling rules' fallback to refuse one it
 * would leave with no effect.
 */
export function givenSettings(options: TextCompletionModelOptions): SchedulingSetting[] {
  const given = options as unknown as Readonly<Partial<Record<SchedulingSetting, unknown>>>;
  return settingsWhere(() => true).filter((setting) => IS_OPTION[setting] && given[setting] !== undefined);
}

/**
 * The batcher options: the user's on top of the pool's, with the library defaults under both. A user's setting that
 * the pool needs otherwise is a `TypeError` naming both values: a lower layer never replaces it in silence.
 */
export function mergeBatcherOptions(
  user: UserBatcherOptions,
  pool: WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>['batcherOptions'],
  scheduling: Scheduling,
): UserBatcherOptions & typeof pool {
  const defined: Record<string, unknown> = dropUndefined({ ...user });
  for (const [key, value] of Object.entries(pool)) {
    if (!(key in defined) || defined[key] === value) continue;
    // The scheduling rules refuse what a scheduling fixes before this runs: this guards what they do not cover.
    throw new TypeError(
      `\`${key}\`: you passed ${String(defined[key])}, the worker pool needs ${String(value)} ` +
        `(pool.batcherOptions, ${scheduling} scheduling)`,
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
