// An embedding model in worker threads of this process behind one batcher: the `EmbeddingService` the embeddings
// apps serve, its pooling and normalisation read from the model folder where it says.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { BatchError, ErrorCode } from '@microbatch/core';
import { checkOneOf } from '@microbatch/core/util';
import { loadTokenizer } from '@microbatch/inference';
import type { ModelDtype, OnnxInput, OnnxOutput } from '@microbatch/inference';
import { type EncoderBatcherOptions, encoderFolder, encoderGraph, startEncoderBatcher } from './encoder-batcher.js';
import { type Pooling, poolEmbedding } from './embedding-pooling.js';
import type { EmbeddingService } from './embedding-service.js';

const POOLINGS: readonly Pooling[] = ['mean', 'cls', 'last_token'];

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

interface ModelConfig {
  readonly hidden_size?: number;
  readonly max_position_embeddings?: number;
  readonly vocab_size?: number;
  readonly type_vocab_size?: number;
}

function readJson<T>(path: string): T | undefined {
  if (!existsSync(path)) return undefined;
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/** sentence-transformers' pooling and normalisation, read from the folder where it says. */
export function folderPooling(dir: string): { pooling: Pooling | undefined; normalize: boolean | undefined } {
  const config = readJson<Record<string, unknown>>(join(dir, '1_Pooling', 'config.json'));
  let pooling: Pooling | undefined;
  if (config !== undefined) {
    if (config.pooling_mode_cls_token === true) pooling = 'cls';
    else if (config.pooling_mode_lasttoken === true) pooling = 'last_token';
    else if (config.pooling_mode_mean_tokens === true) pooling = 'mean';
    else {
      throw new Error(
        `${join(dir, '1_Pooling', 'config.json')} asks for a pooling mode this server does not have (mean, cls, last token)`,
      );
    }
  }
  const modules = readJson<Array<{ type?: unknown }>>(join(dir, 'modules.json'));
  const normalize = modules?.some((module) => String(module.type).endsWith('.Normalize'));
  return { pooling, normalize };
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
  const config = readJson<ModelConfig>(join(dir, 'config.json')) ?? {};
  const dimensions = config.hidden_size;
  if (!Number.isInteger(dimensions) || (dimensions as number) < 1) {
    throw new Error(`${join(dir, 'config.json')} has no \`hidden_size\``);
  }
  const folder = folderPooling(dir);
  const pooling = checkOneOf('pooling', options.pooling ?? folder.pooling ?? 'mean', POOLINGS);
  const normalize = options.normalize ?? folder.normalize ?? true;
  const encoder = startEncoderBatcher(options, {
    dir,
    graph,
    output: 'last_hidden_state',
    name: 'embed',
    maxQueueSize: 1024,
    maxPositions: config.max_position_embeddings,
  });
  const { batcher } = encoder;
  // BERT-style encoders take segment ids too (all 0: one segment).
  const withTypes = config.type_vocab_size !== undefined;
  const item = (ids: readonly number[]): OnnxInput =>
    withTypes ? { input_ids: ids, token_type_ids: Array.from({ length: ids.length }, () => 0) } : { input_ids: ids };
  const vector = (output: OnnxOutput): Float32Array =>
    poolEmbedding(output.last_hidden_state as never, dimensions as number, pooling, normalize);

  let encode: ((text: string) => number[]) | undefined;
  const tokenizer = loadTokenizer(dir).then((loaded) => {
    encode = (text) => loaded.encode(text);
  });
  // Requests are tokenized on a thread of their own; `tokenize` (this thread) stays for callers that want it.
  const threads = encoder.tokenizer;
  const ready = Promise.all([encoder.ready, tokenizer]).then(() => undefined);
  ready.catch(() => undefined);
  return {
    id: options.id ?? basename(dir),
    dimensions: dimensions as number,
    maxTokens: encoder.maxTokens,
    vocabSize: config.vocab_size ?? Number.MAX_SAFE_INTEGER,
    pooling,
    normalize,
    truncatableDimensions: options.truncatableDimensions ?? false,
    batcher,
    batchers: [batcher],
    ready,
    isReady: () => encoder.isReady() && encode !== undefined,
    tokenize: (text) => {
      if (encode === undefined) throw new BatchError(ErrorCode.UNAVAILABLE, 'The model is still loading');
      return encode(text);
    },
    encodeAll: async (texts) => {
      if (!threads.isReady()) throw new BatchError(ErrorCode.UNAVAILABLE, 'The model is still loading');
      return (await threads.encodeAll(texts)).encodings.map((encoding) => encoding.ids);
    },
    embed: async (ids, call) => vector(await batcher(item(ids), call)),
    embedAll: async (all, call) => (await batcher.callAll(all.map(item), call)).map(vector),
    drain: encoder.drain,
    close: encoder.close,
  };
}
