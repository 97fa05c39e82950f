// What the encoder services share (the embedding model and the sequence classifier): the model folder's ONNX
// graph, the worker pool running the raw `onnx` runner, the one batcher in front of it (items cost their token
// count, batched by length bucket), its log, the tokenizer thread requests are tokenized on, and their readiness,
// drain and close. Each service reads its folder with `encoder-folder.ts` and builds its answers over this.
import { type Batcher, createBatcher } from '@microbatch/core';
import { checkInteger, checkOneOf, dropUndefined } from '@microbatch/core/util';
import {
  DTYPE_CHOICES,
  GRAPH_NAMES,
  createTokenizerThreads,
  createWorkerPool,
  findModelFile,
} from '@microbatch/inference';
import type { ModelDtype, OnnxInput, OnnxOutput, TokenizerThreads, WorkerPool } from '@microbatch/inference';
import { type LogLine, type Logger, logBatches, logRefusals } from './batch-log.js';

/**
 * The options both encoder services take for their batcher and workers (`EmbeddingModelOptions`,
 * `SequenceClassifierOptions` extend it). An item is one text, pair or input.
 *
 * @example
 * ```ts
 * const options: EncoderBatcherOptions = { maxBatchCost: 4096, workers: 2 };
 * ```
 */
export interface EncoderBatcherOptions {
  /**
   * The most items one model call holds.
   * @default 64
   */
  readonly maxBatchSize?: number;
  /**
   * The most tokens one model call holds (each item costs its token count), so one call never pads past this.
   * @default 8192
   */
  readonly maxBatchCost?: number;
  /**
   * Items are batched only with items of the same length bucket (token counts rounded up to a multiple of this),
   * so a model call pads each item by less than this many tokens instead of to the longest of a mixed batch.
   * `0` turns bucketing off (one queue; each call padded to its longest item).
   * @default 8
   */
  readonly lengthBucket?: number;
  /** @default 0 (work-conserving) */
  readonly batchWaitTimeoutMs?: number;
  /** @default Infinity */
  readonly maxLatencyMs?: number;
  /** The most items waiting (the default is each service's own). */
  readonly maxQueueSize?: number;
  /** @default 1 */
  readonly workers?: number;
  /** @default 1 */
  readonly threads?: number;
  /** @default 'cpu' */
  readonly executionProvider?: string;
  /** Where the one-line-per-batch log goes; `false` turns it off. @default console.log */
  readonly log?: LogLine | false;
  /** A pino-compatible logger, instead of `log`. */
  readonly logger?: Logger;
}

/** What differs between the encoder services' batchers. */
export interface EncoderBatcherSpec {
  /** The model folder (resolved). */
  readonly dir: string;
  /** The ONNX graph the workers load ({@link encoderGraph}). */
  readonly graph: string;
  /** The graph output the workers return (`last_hidden_state`, `logits`). */
  readonly output: string;
  /** The batcher's name (its log lines and metrics). */
  readonly name: string;
  /** The service's default `maxQueueSize`. */
  readonly maxQueueSize: number;
  /** The model's `max_position_embeddings`, if its config says. @default 512 */
  readonly maxPositions: number | undefined;
}

/** One encoder service's pool, batcher and tokenizer thread, and what its contract needs of them. */
export interface EncoderBatcher {
  readonly batcher: Batcher<OnnxInput, OnnxOutput>;
  readonly tokenizer: TokenizerThreads;
  /** The most tokens of one text or pair: the model's positions, or `maxBatchCost` when smaller. */
  readonly maxTokens: number;
  readonly maxQueueSize: number;
  /** An item's token count (its cost). */
  readonly tokens: (item: OnnxInput) => number;
  /** Settles when the workers and the tokenizer thread are loaded. */
  readonly ready: Promise<void>;
  readonly isReady: () => boolean;
  /** Closes the batcher: what it accepted finishes, nothing new is taken. */
  readonly drain: () => Promise<void>;
  /** Drains, then stops the workers and the tokenizer thread. */
  readonly close: () => Promise<void>;
}

/**
 * The file transformers.js would load with `dtype`, picked here (not in the worker) because the raw `onnx` runner
 * takes a file: a missing one fails now, naming what the folder has. By names only: the worker opens it.
 *
 * @example
 * ```ts
 * const graph = encoderGraph(dir, 'q8'); // <dir>/onnx/model_quantized.onnx
 * ```
 */
export function encoderGraph(dir: string, dtype: 'auto' | ModelDtype | undefined): string {
  return findModelFile(dir, checkOneOf('dtype', dtype ?? 'auto', DTYPE_CHOICES), GRAPH_NAMES.encoder).path;
}

/**
 * Starts an encoder's worker pool (the raw `onnx` runner, right padding) behind one batcher whose items cost their
 * token count: a model call holds at most `maxBatchSize` items and `maxBatchCost` tokens, batched by length bucket
 * and padded to its own longest; and the tokenizer thread its requests are tokenized on.
 *
 * @example
 * ```ts
 * const encoder = startEncoderBatcher(options, { dir, graph, output: 'logits', name: 'rerank', ... });
 * ```
 */
export function startEncoderBatcher(options: EncoderBatcherOptions, spec: EncoderBatcherSpec): EncoderBatcher {
  const settings = {
    maxBatchSize: 64,
    maxBatchCost: 8192,
    batchWaitTimeoutMs: 0,
    maxLatencyMs: Number.POSITIVE_INFINITY,
    maxQueueSize: spec.maxQueueSize,
    ...dropUndefined({
      maxBatchSize: options.maxBatchSize,
      maxBatchCost: options.maxBatchCost,
      batchWaitTimeoutMs: options.batchWaitTimeoutMs,
      maxLatencyMs: options.maxLatencyMs,
      maxQueueSize: options.maxQueueSize,
    }),
  };
  const pool: WorkerPool<OnnxInput, OnnxOutput> = createWorkerPool({
    runner: { task: 'onnx', model: spec.graph, outputs: [spec.output], paddingSide: 'right' },
    size: options.workers ?? 1,
    threads: options.threads ?? 1,
    executionProvider: options.executionProvider ?? 'cpu',
  });
  const bucket = checkInteger('lengthBucket', options.lengthBucket ?? 8, 0);
  const tokens = (item: OnnxInput) => (item.input_ids as readonly number[]).length;
  // A running encoder call is never cancelled: it takes milliseconds, while stopping it means retiring its worker
  // and loading the model again (onnxruntime cannot be interrupted). A cancelled item still leaves its queue at
  // once, and the answer of one cancelled while its call runs is dropped.
  const batcher = createBatcher<OnnxInput, OnnxOutput>((inputs) => pool.run(inputs), {
    ...settings,
    ...pool.batcherOptions,
    ...(bucket > 0 ? { batchKey: (item: OnnxInput) => Math.ceil(tokens(item) / bucket) } : {}),
    cost: tokens,
    name: spec.name,
  });
  const log = options.logger ?? options.log ?? console.log;
  if (log !== false) {
    logBatches(batcher, log);
    logRefusals(batcher, log);
  }
  const tokenizer = createTokenizerThreads(spec.dir);
  const ready = Promise.all([pool.ready, tokenizer.ready]).then(() => undefined);
  ready.catch(() => undefined);
  const drain = () => batcher.close();
  return {
    batcher,
    tokenizer,
    maxTokens: Math.min(spec.maxPositions ?? 512, settings.maxBatchCost),
    maxQueueSize: settings.maxQueueSize,
    tokens,
    ready,
    isReady: () => pool.isReady && tokenizer.isReady() && !batcher.closed,
    drain,
    close: async () => {
      await drain();
      await Promise.all([pool.close(), tokenizer.close()]);
    },
  };
}
