// An embedding model in worker threads of this process behind one batcher: the `EmbeddingService` the embeddings
// apps serve, its pooling and normalisation read from the model folder where it says.
import { checkOneOf } from '@microbatch/core/util';
import type { ModelDtype, OnnxInput, OnnxOutput } from '@microbatch/inference';
import { type EncoderBatcherOptions, encoderGraph, startEncoderBatcher } from './encoder-batcher.js';
import { encoderFolder, readEncoderFolder } from './encoder-folder.js';
import { POOLINGS, type Pooling, poolEmbedding } from './embedding-pooling.js';
import type { EmbeddingService } from './embedding-service.js';
import { embeddingTokenizing } from './embedding-tokenizing.js';

/**
 * Options of {@link createEmbeddingModel}.
 *
 * @example
 * ```ts
 * const options: EmbeddingModelOptions = { model: 'models/all-MiniLM-L6-v2', maxBatchCost: 8192 };
 * ```
 */
export interface EmbeddingModelOptions extends EncoderBatcherOptions {
  /**
   * The model folder in transformers.js layout: `config.json`, `tokenizer.json`, an ONNX graph under `onnx/` (which
   * one: `dtype`) with a `last_hidden_state` output; sentence-transformers' `1_Pooling/config.json` and
   * `modules.json` when present.
   */
  readonly model: string;
  /**
   * Which of the folder's ONNX files the workers load, as transformers.js names them (`'q8'`:
   * `onnx/model_quantized.onnx`, `'fp32'`: `onnx/model.onnx` ...); `'auto'`: the first present in inference's
   * `AUTO_DTYPE_ORDER`. A dtype the folder has no file for throws an `Error` at once, naming the dtypes it has.
   * @default 'auto'
   */
  readonly dtype?: 'auto' | ModelDtype;
  /**
   * The name responses report as `model`.
   * @default the folder's name
   */
  readonly id?: string;
  /**
   * How token vectors become one: the attention-masked mean, the first (`[CLS]`) token, or the last token.
   * @default read from `1_Pooling/config.json`, else 'mean'
   */
  readonly pooling?: Pooling;
  /**
   * Scale every embedding to unit length (L2).
   * @default true where `modules.json` lists a Normalize module or there is no `modules.json`, else false
   */
  readonly normalize?: boolean;
  /**
   * Whether the model was trained so that its embeddings may be cut short (Matryoshka): then requests may ask for
   * fewer `dimensions` (cut, then normalised again); otherwise `dimensions` other than the model's are a 400.
   * @default false
   */
  readonly truncatableDimensions?: boolean;
  /** @default 1024 */
  readonly maxQueueSize?: number;
}

/**
 * Starts an embedding model (a BERT-style encoder in transformers.js layout) on worker threads behind one batcher
 * whose items cost their token count: a model call holds at most `maxBatchSize` inputs and `maxBatchCost` tokens
 * and is padded to its own longest input (the ONNX runner's per-batch padding). Requests' texts are tokenized on a
 * tokenizer thread of the model's (`encodeAll`), so cost, usage and the length check are exact before anything is
 * queued, and the main thread never tokenizes; pooling and
 * normalisation run on the model's `last_hidden_state` as sentence-transformers would.
 *
 * @example
 * ```ts
 * const model = createEmbeddingModel({ model: 'models/all-MiniLM-L6-v2' });
 * await model.ready;
 * ```
 */
export function createEmbeddingModel(options: EmbeddingModelOptions): EmbeddingService {
  const dir = encoderFolder(options.model, 'embedding model');
  const graph = encoderGraph(dir, options.dtype);
  const folder = readEncoderFolder(dir, 'feature-extraction');
  const { dimensions, withTypes } = folder;
  const pooling = checkOneOf('pooling', options.pooling ?? folder.pooling ?? 'mean', POOLINGS);
  const normalize = options.normalize ?? folder.normalize ?? true;
  const encoder = startEncoderBatcher(options, {
    dir,
    graph,
    output: 'last_hidden_state',
    name: 'embed',
    maxQueueSize: 1024,
    maxPositions: folder.maxTokens,
  });
  const { batcher } = encoder;
  // BERT-style encoders take segment ids too (all 0: one segment).
  const item = (ids: readonly number[]): OnnxInput =>
    withTypes ? { input_ids: ids, token_type_ids: Array.from({ length: ids.length }, () => 0) } : { input_ids: ids };
  const vector = (output: OnnxOutput): Float32Array =>
    poolEmbedding(output.last_hidden_state as never, dimensions, pooling, normalize);

  // Requests are tokenized on a thread of their own; `tokenize` (this thread) stays for callers that want it.
  const tokenizing = embeddingTokenizing(dir, encoder.tokenizer, 'The model is still loading');
  const ready = Promise.all([encoder.ready, tokenizing.loaded]).then(() => undefined);
  ready.catch(() => undefined);
  return {
    id: options.id ?? folder.name,
    dimensions,
    maxTokens: encoder.maxTokens,
    vocabSize: folder.vocabSize,
    pooling,
    normalize,
    truncatableDimensions: options.truncatableDimensions ?? false,
    batcher,
    batchers: [batcher],
    ready,
    isReady: () => encoder.isReady() && tokenizing.isLoaded(),
    tokenize: tokenizing.tokenize,
    encodeAll: tokenizing.encodeAll,
    embed: async (ids, call) => vector(await batcher(item(ids), call)),
    embedAll: async (all, call) => (await batcher.callAll(all.map(item), call)).map(vector),
    drain: encoder.drain,
    close: encoder.close,
  };
}
