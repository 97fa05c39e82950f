// The model side of an encoder served over a queue (`microbatch worker --task feature-extraction|rerank|
// text-classification`): the graph on worker threads behind a local batcher, and the queue handlers that run a pull's
// entries through it. The local batcher splits a pull into model calls by length bucket and token cost, as the
// one-process services do, so a pull of mixed lengths is never padded to its longest.
import { type BatchHandler, createBatcher } from '@microbatch/core';
import { checkInteger, checkOneOf } from '@microbatch/core/util';
import { DTYPE_CHOICES, GRAPH_NAMES, createWorkerPool, findModelFile } from '@microbatch/inference';
import type { ModelDtype, OnnxInput, OnnxOutput, WorkerPool } from '@microbatch/inference';
import { type EncoderFolder, type EncoderTask, readEncoderFolder } from './encoder-folder.js';
import { ENCODER_HANDLERS, type EmbedEntry, floatsToWire } from './encoder-wire.js';
import { POOLINGS, poolEmbedding } from './embedding-pooling.js';

const TASKS: readonly EncoderTask[] = ['feature-extraction', 'rerank', 'text-classification'];

/**
 * Options of {@link createEncoderWorker}.
 *
 * @example
 * ```ts
 * const options: EncoderWorkerOptions = { model: 'models/all-MiniLM-L6-v2', task: 'feature-extraction' };
 * ```
 */
export interface EncoderWorkerOptions {
  /** The model folder in transformers.js layout (as `createEmbeddingModel` / `createSequenceClassifier` read it). */
  readonly model: string;
  readonly task: EncoderTask;
  /** @default 'auto' */
  readonly dtype?: 'auto' | ModelDtype;
  /** The most texts or pairs one model call holds. @default 64 */
  readonly maxBatchSize?: number;
  /**
   * The most tokens one model call holds; at least the model's `max_position_embeddings`, since replicas admit any
   * text up to it.
   * @default 8192
   */
  readonly maxBatchCost?: number;
  /** Items of one model call share a length bucket (token counts rounded up to a multiple of this). @default 8 */
  readonly lengthBucket?: number;
  /** @default 1 */
  readonly workers?: number;
  /** @default 1 */
  readonly threads?: number;
  /** @default 'cpu' */
  readonly executionProvider?: string;
}

/**
 * A started encoder worker: its pool, and the handler a queue worker serves under `ENCODER_HANDLERS[task]`.
 *
 * @example
 * ```ts
 * createRedisWorker({ url, queue, handlers: encoder.handlers, concurrency: encoder.pool.size });
 * ```
 */
export interface EncoderWorker {
  readonly task: EncoderTask;
  readonly folder: EncoderFolder;
  readonly pool: WorkerPool<OnnxInput, OnnxOutput>;
  /** One handler, named as replicas call it. */
  readonly handlers: Readonly<Record<string, BatchHandler<never, unknown>>>;
  readonly ready: Promise<void>;
  /** Finishes the model calls running, then stops the worker threads. */
  close(): Promise<void>;
}

/**
 * Loads an encoder for a queue worker: embeddings are pooled (and normalised) here as each entry asks and sent as
 * float32 bytes; a classifier's or cross-encoder's items are answered with their logits. Throws an `Error` naming
 * the file when the folder cannot serve `task`.
 *
 * @example
 * ```ts
 * const encoder = createEncoderWorker({ model: 'models/ms-marco-MiniLM-L-6-v2', task: 'rerank' });
 * await encoder.ready;
 * ```
 */
export function createEncoderWorker(options: EncoderWorkerOptions): EncoderWorker {
  if (typeof options !== 'object' || options === null) throw new TypeError('Expected `options` to be an object');
  const task = checkOneOf('task', options.task, TASKS);
  const folder = readEncoderFolder(options.model, task);
  const graph = findModelFile(
    folder.dir,
    checkOneOf('dtype', options.dtype ?? 'auto', DTYPE_CHOICES),
    GRAPH_NAMES.encoder,
  );
  const maxBatchSize = checkInteger('maxBatchSize', options.maxBatchSize ?? 64, 1);
  const maxBatchCost = checkInteger('maxBatchCost', options.maxBatchCost ?? 8192, 1);
  if (maxBatchCost < folder.maxTokens) {
    throw new TypeError(
      `Expected \`maxBatchCost\` (${maxBatchCost}) to be at least the model's ${folder.maxTokens} tokens: replicas admit texts that long`,
    );
  }
  const bucket = checkInteger('lengthBucket', options.lengthBucket ?? 8, 0);
  const output = task === 'feature-extraction' ? 'last_hidden_state' : 'logits';
  const pool: WorkerPool<OnnxInput, OnnxOutput> = createWorkerPool({
    runner: { task: 'onnx', model: graph.path, outputs: [output], paddingSide: 'right' },
    size: options.workers ?? 1,
    threads: options.threads ?? 1,
    executionProvider: options.executionProvider ?? 'cpu',
  });
  const tokens = (item: OnnxInput) => (item.input_ids as readonly number[]).length;
  const batcher = createBatcher<OnnxInput, OnnxOutput>((inputs) => pool.run(inputs), {
    maxBatchSize,
    maxBatchCost,
    // What waits here was pulled from the queue, whose pulls bound it (the worker's slots x its pull size).
    maxQueueSize: Number.MAX_SAFE_INTEGER,
    ...pool.batcherOptions,
    ...(bucket > 0 ? { batchKey: (item: OnnxInput) => Math.ceil(tokens(item) / bucket) } : {}),
    cost: tokens,
    name: ENCODER_HANDLERS[task],
  });
  const embed = async (entries: readonly EmbedEntry[]) => {
    const inputs = entries.map((entry): OnnxInput => {
      checkOneOf('pooling', entry.pooling, POOLINGS);
      const { input_ids, token_type_ids } = entry;
      return token_type_ids === undefined ? { input_ids } : { input_ids, token_type_ids };
    });
    const outputs = await batcher.callAll(inputs);
    return outputs.map((out, index) => {
      const { pooling, normalize } = entries[index] as EmbedEntry;
      const vector = poolEmbedding(out.last_hidden_state as never, folder.dimensions, pooling, normalize === true);
      return { embedding: floatsToWire(vector) };
    });
  };
  const logits = async (items: readonly OnnxInput[]) =>
    (await batcher.callAll(items)).map((out) => {
      const tensor = out.logits;
      if (tensor === undefined || tensor.dims.length !== 1 || tensor.dims[0] !== folder.labels.length) {
        throw new Error(`Expected logits of [${folder.labels.length}], got [${tensor?.dims.join(', ') ?? ''}]`);
      }
      return { logits: Array.from(tensor.data as Float32Array) };
    });
  const handler = (task === 'feature-extraction' ? embed : logits) as BatchHandler<never, unknown>;
  return {
    task,
    folder,
    pool,
    handlers: { [ENCODER_HANDLERS[task]]: handler },
    ready: pool.ready,
    close: async () => {
      await batcher.close();
      await pool.close();
    },
  };
}
