import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { DEFAULTS, createBatcher, createStreamingBatcher } from '@microbatch/core';
import { otelTracer } from '@microbatch/core/otel';
import { dropUndefined } from '@microbatch/core/util';
import type { Batcher, BatcherBase, StreamingBatcher } from '@microbatch/core';
import {
  TEXT_GENERATION_DEFAULTS,
  createTextGenerationParser,
  createTextGenerationValidator,
  createWorkerPool,
  defaultMaxStepTokens,
} from '@microbatch/inference';
import type {
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationLimits,
  TextGenerationOutput,
  TextGenerationParser,
  WorkerPool,
} from '@microbatch/inference';
import {
  type DecodeLoopSource,
  type LogLine,
  type Logger,
  logBatches,
  logDecodeLoop,
  logRefusals,
} from './batch-log.js';
import { type ChatTemplate, loadChatTemplate } from './chat-template.js';

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

/**
 * What the apps serve: text completion behind batchers, wherever the model runs (worker threads of this process,
 * `createTextCompletionModel`; or workers pulling from a shared queue, `@microbatch/redis`).
 *
 * @example
 * ```ts
 * const { text } = await service.generate(service.validate({ prompt: 'Once upon a time, ', max_tokens: 16 }));
 * ```
 */
export interface TextCompletionService {
  /** The name responses report as `model`. */
  readonly id: string;
  /** Whole completions: one input in, one output out; concurrent calls share a model call. */
  readonly generate: Batcher<TextGenerationInput, TextGenerationOutput>;
  /** Streamed completions: `streamer.stream(input)` yields the caller's chunks as they are decoded. */
  readonly streamer: StreamingBatcher<TextGenerationInput, TextGenerationChunk>;
  /** How `/v1/chat/completions` renders a conversation; the plain role-prefixed fallback when absent. */
  readonly chatTemplate?: ChatTemplate;
  /** Both batchers, for health checks and metrics. */
  readonly batchers: readonly BatcherBase[];
  /**
   * Continuous scheduling in this process: the decode loops, whose activity the log and the metrics report (the
   * batchers then hand the loops one request at a time, so their batch sizes are 1 by construction).
   */
  readonly decodeLoop?: DecodeLoopSource;
  /** Resolves once the service can serve; rejects (naming the reason) if it never will. */
  readonly ready: Promise<void>;
  /** Whether the service can serve now, for readiness probes. */
  readonly isReady: () => boolean | PromiseLike<boolean>;
  /**
   * Checks an untrusted `{ prompt, max_tokens, temperature, top_p, stop }` body; throws `BatchError('INVALID_INPUT')`
   * naming the field.
   */
  readonly validate: (body: unknown) => TextGenerationInput;
  /** Refuses new calls (`CLOSED`, 503) and resolves once queued and running batches have finished. */
  readonly drain: () => Promise<void>;
  /** {@link drain}, then releases what the service holds (workers, connections). */
  readonly close: () => Promise<void>;
}

/**
 * A text-generation model served through batchers on worker threads of this process.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k' });
 * await model.ready;
 * model.pool.stats().readyWorkers; // 1
 * ```
 */
export interface TextCompletionModel extends TextCompletionService {
  /** The worker threads running the model. */
  readonly pool: WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;
  /** Whether the model can serve now, for readiness probes. */
  readonly isReady: () => boolean;
}

/**
 * The work one generation weighs, for admission's latency estimate: the tokens it may generate (a decode step each)
 * plus its prompt (about 4 characters a token; the tokenizer may not be loaded yet) at `promptTokensPerStep` tokens
 * a step. Under request scheduling a prompt token weighs what a generated one does (the default, 1); the continuous
 * loop prefills up to its step budget (`maxStepTokens`) a step, so there a 450-token prompt adds about
 * 450 / maxStepTokens steps, and a 5-token one about none.
 *
 * @example
 * ```ts
 * textCompletionCost({ prompt: 'Once upon a time ', max_new_tokens: 16 }); // 21
 * textCompletionCost({ prompt: 'x'.repeat(1800), max_new_tokens: 16 }, 64); // 16 + 450 / 64
 * ```
 */
export function textCompletionCost(input: TextGenerationInput, promptTokensPerStep = 1): number {
  return Math.ceil(input.prompt.length / 4) / promptTokensPerStep + (input.max_new_tokens ?? 16);
}

/**
 * Starts a text-generation model in worker threads behind two batchers (whole and streamed completions) that share
 * its workers, and logs one line per batch (and refusals, at most one line a second). Returns at once: the model
 * loads in the background (`ready`), so a server can listen, and report not-ready, meanwhile. A `model` that is not
 * a transformers.js folder (no `config.json` / `tokenizer.json`) throws an `Error` naming the folder at once.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k', maxSequences: 16, maxLatencyMs: 1500 });
 * await model.ready;
 * ```
 */
export function createTextCompletionModel(options: TextCompletionModelOptions): TextCompletionModel {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected \`options\` to be an object, got \`${String(options)}\` (${typeof options})`);
  }
  const { model, limits } = options;
  const log = options.logger ?? options.log ?? console.log;
  if (typeof model !== 'string' || model === '') {
    throw new TypeError(`Expected \`model\` to be a non-empty string, got \`${String(model)}\` (${typeof model})`);
  }
  checkModelFolder(model);
  const scheduling = options.scheduling ?? 'continuous';
  if (scheduling !== 'continuous' && scheduling !== 'request') {
    throw new TypeError(
      `Expected \`scheduling\` to be one of 'continuous', 'request', got ${JSON.stringify(scheduling)}`,
    );
  }
  checkScheduledOptions(scheduling, options);
  const pool = createWorkerPool({
    runner: {
      task: 'text-generation',
      model,
      scheduling,
      ...dropUndefined({
        maxSequences: options.maxSequences,
        maxStepTokens: options.maxStepTokens,
        prefixCacheMb: options.prefixCacheMb,
      }),
    },
    ...dropUndefined({ size: options.workers, threads: options.threads, executionProvider: options.executionProvider }),
  });
  // Whole and streamed completions are separate batchers (their handlers differ) on the same workers. The pool says
  // how it wants to be fed (continuous: one request per call, many at once; request: batches split by sampling);
  // the user's settings come on top, and one the pool sets differently is refused, never replaced.
  let batcherOptions: ReturnType<typeof mergeBatcherOptions>;
  try {
    batcherOptions = mergeBatcherOptions(
      {
        maxBatchSize: options.maxBatchSize,
        batchWaitTimeoutMs: options.batchWaitTimeoutMs,
        maxLatencyMs: options.maxLatencyMs,
        maxQueueSize: options.maxQueueSize,
      },
      pool.batcherOptions,
      scheduling,
    );
  } catch (error) {
    // Its worker threads would keep the process alive.
    pool.close().catch(() => undefined);
    throw error;
  }
  // Each batch an OpenTelemetry span linked to the requests it served, once the app registers an SDK.
  const tracer = otelTracer();
  // The continuous loop prefills a prompt over steps of its budget: its tokens weigh that much less than decoding.
  const stepTokens =
    options.maxStepTokens ?? defaultMaxStepTokens(options.maxSequences ?? TEXT_GENERATION_DEFAULTS.maxSequences);
  const cost =
    pool.scheduling === 'continuous'
      ? (input: TextGenerationInput) => textCompletionCost(input, stepTokens)
      : (input: TextGenerationInput) => textCompletionCost(input);
  const generate = createBatcher(pool.handler, {
    ...batcherOptions,
    cost,
    tracer,
    name: 'generate',
  });
  const streamer = createStreamingBatcher(pool.streamingHandler, {
    ...batcherOptions,
    cost,
    tracer,
    name: 'stream',
  });
  const batchers = [generate, streamer] as const;
  const decodeLoop = pool.scheduling === 'continuous' ? pool : undefined;
  let stopLoopLog = (): void => undefined;
  if (log !== false) {
    for (const batcher of batchers) {
      // Continuous: the batchers' batches are single requests; the loop's log says how they were batched.
      if (decodeLoop === undefined) logBatches(batcher, log);
      logRefusals(batcher, log);
    }
    if (decodeLoop !== undefined) stopLoopLog = logDecodeLoop(decodeLoop, log);
  }

  // Until the tokenizer is loaded, the cheap parser checks requests; the worker then makes the token check itself.
  const parse: TextGenerationParser = createTextGenerationParser(limits);
  let validate: TextGenerationParser | undefined;
  const tokenizer = createTextGenerationValidator({ ...limits, model }).then((loaded) => {
    validate = loaded;
  });
  const ready = Promise.all([pool.ready, tokenizer]).then(() => undefined);
  // A model nobody awaits must not crash the process with an unhandled rejection; `ready` still rejects.
  ready.catch(() => undefined);

  const drain = async (): Promise<void> => {
    await Promise.all(batchers.map((batcher) => batcher.close()));
  };
  return {
    id: options.id ?? basename(resolve(model)),
    pool,
    generate,
    streamer,
    batchers,
    ...(decodeLoop === undefined ? {} : { decodeLoop }),
    chatTemplate: loadChatTemplate(model),
    ready,
    isReady: () => pool.isReady && validate !== undefined && !batchers.some((batcher) => batcher.closed),
    validate: (body) => (validate ?? parse)(body),
    drain,
    close: async () => {
      await drain();
      // Every answer is out, and the loop's last steps were reported before them: the log's last line goes now.
      stopLoopLog();
      await pool.close();
    },
  };
}

/** The batcher settings a user may pass to {@link createTextCompletionModel}. */
interface UserBatcherOptions {
  readonly maxBatchSize?: number;
  readonly batchWaitTimeoutMs?: number;
  readonly maxLatencyMs?: number;
  readonly maxQueueSize?: number;
}

/** Options that mean something under one scheduling only: one set under the other is refused, naming it. */
function checkScheduledOptions(scheduling: 'continuous' | 'request', options: TextCompletionModelOptions): void {
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
function mergeBatcherOptions(
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

function checkModelFolder(model: string): void {
  const dir = resolve(model);
  if (!existsSync(dir)) throw new Error(`Model folder not found: ${dir}`);
  const missing = MODEL_FILES.filter((file) => !existsSync(join(dir, file)));
  if (missing.length > 0) {
    throw new Error(`${dir} is not a transformers.js model folder: it has no ${missing.join(' or ')}`);
  }
}
