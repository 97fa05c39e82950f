import { basename, resolve } from 'node:path';
import { createBatcher, createStreamingBatcher } from '@microbatch/core';
import type { Batcher, BatcherBase, StreamingBatcher } from '@microbatch/core';
import {
  createTextGenerationParser,
  createTextGenerationValidator,
  createWorkerPool,
  textGenerationBatchKey,
} from '@microbatch/inference';
import type {
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationLimits,
  TextGenerationOutput,
  TextGenerationParser,
  WorkerPool,
} from '@microbatch/inference';
import { type LogLine, logBatches } from './batch-log.js';

/**
 * Options of {@link createTextCompletionModel}.
 *
 * @example
 * ```ts
 * const options: TextCompletionModelOptions = { model: 'models/tinystories-656k', maxBatchSize: 8, batchWaitTimeoutMs: 5 };
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
   * Most requests per model call.
   * @default 8
   */
  readonly maxBatchSize?: number;
  /**
   * How long the first request of a batch waits for company, in ms.
   * @default 5
   */
  readonly batchWaitTimeoutMs?: number;
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
}

/**
 * A text-generation model served through batchers: what every text-completion route of an app shares.
 *
 * @example
 * ```ts
 * const { text } = await model.generate(model.validate({ prompt: 'Once upon a time, ', max_tokens: 16 }));
 * ```
 */
export interface TextCompletionModel {
  /** The name responses report as `model`. */
  readonly id: string;
  /** The worker threads running the model. */
  readonly pool: WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;
  /** Whole completions: one input in, one output out; concurrent calls share a model call. */
  readonly generate: Batcher<TextGenerationInput, TextGenerationOutput>;
  /** Streamed completions: `streamer.stream(input)` yields the caller's chunks as they are decoded. */
  readonly streamer: StreamingBatcher<TextGenerationInput, TextGenerationChunk>;
  /** Both batchers, for health checks and metrics. */
  readonly batchers: readonly BatcherBase[];
  /** Resolves once the workers and the tokenizer are loaded; rejects (naming the model path) if one fails to. */
  readonly ready: Promise<void>;
  /** Whether the model can serve now, for readiness probes. */
  isReady(): boolean;
  /**
   * Checks an untrusted `{ prompt, max_tokens, temperature, top_p, stop }` body; throws `BatchError('INVALID_INPUT')`
   * naming the field. Counts prompt tokens against the context once the tokenizer is loaded.
   */
  validate(body: unknown): TextGenerationInput;
  /** Refuses new calls (`CLOSED`, 503) and resolves once queued and running batches have finished. */
  drain(): Promise<void>;
  /** {@link drain}, then stops the workers. */
  close(): Promise<void>;
}

const DEFAULTS = { maxBatchSize: 8, batchWaitTimeoutMs: 5, workers: 1, threads: 1, executionProvider: 'cpu' } as const;

/**
 * Starts a text-generation model in worker threads behind two batchers (whole and streamed completions) that share
 * its workers, and logs one line per batch. Returns at once: the model loads in the background (`ready`), so a
 * server can listen, and report not-ready, meanwhile.
 *
 * @example
 * ```ts
 * const model = createTextCompletionModel({ model: 'models/tinystories-656k', maxBatchSize: 8, batchWaitTimeoutMs: 5 });
 * await model.ready;
 * ```
 */
export function createTextCompletionModel(options: TextCompletionModelOptions): TextCompletionModel {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected \`options\` to be an object, got \`${String(options)}\` (${typeof options})`);
  }
  const { model, limits, log = console.log } = options;
  if (typeof model !== 'string' || model === '') {
    throw new TypeError(`Expected \`model\` to be a non-empty string, got \`${String(model)}\` (${typeof model})`);
  }
  const { maxBatchSize, batchWaitTimeoutMs, workers, threads, executionProvider } = { ...DEFAULTS, ...defined(options) };
  const pool = createWorkerPool({
    runner: { task: 'text-generation', model },
    size: workers,
    threads,
    executionProvider,
  });
  // Whole and streamed completions are separate batchers (their handlers differ) on the same workers.
  const batcherOptions = { maxBatchSize, batchWaitTimeoutMs, maxConcurrentBatches: pool.size, batchKey: textGenerationBatchKey };
  const generate = createBatcher(pool.handler, { ...batcherOptions, name: 'generate' });
  const streamer = createStreamingBatcher(pool.streamingHandler, { ...batcherOptions, name: 'stream' });
  const batchers = [generate, streamer] as const;
  if (log !== false) for (const batcher of batchers) logBatches(batcher, log);

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
    ready,
    isReady: () => pool.isReady && validate !== undefined && !batchers.some((batcher) => batcher.closed),
    validate: (body) => (validate ?? parse)(body),
    drain,
    close: async () => {
      await drain();
      await pool.close();
    },
  };
}

/** The options that are set: `{ maxBatchSize: undefined }` must leave the default in place. */
function defined(options: TextCompletionModelOptions): Partial<typeof DEFAULTS> {
  const { maxBatchSize, batchWaitTimeoutMs, workers, threads, executionProvider } = options;
  const entries = Object.entries({ maxBatchSize, batchWaitTimeoutMs, workers, threads, executionProvider });
  return Object.fromEntries(entries.filter(([, value]) => value !== undefined));
}
