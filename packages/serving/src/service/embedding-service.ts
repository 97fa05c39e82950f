// The embedding service contract: what the embeddings endpoint and apps serve, whichever model runs behind it
// (`createEmbeddingModel`: worker threads of this process).
import type { BatcherBase, CallOptions } from '@microbatch/core';
import type { OnnxInput } from '@microbatch/inference';
import type { Pooling } from './embedding-pooling.js';

/** One tokenized input: its ids (special tokens included). */
export type EmbeddingItem = OnnxInput;

/**
 * An embedding model behind a batcher: what the embeddings endpoint and apps serve.
 *
 * @example
 * ```ts
 * const vector = await service.embed(await service.tokenize('hello'));
 * ```
 */
export interface EmbeddingService {
  /** The name responses report as `model`. */
  readonly id: string;
  /** Size of the model's embeddings. */
  readonly dimensions: number;
  /** The most tokens one input may have (`max_position_embeddings`). */
  readonly maxTokens: number;
  /** Token ids are from 0 to `vocabSize - 1`. */
  readonly vocabSize: number;
  readonly pooling: Pooling;
  readonly normalize: boolean;
  readonly truncatableDimensions: boolean;
  /**
   * The batcher of model calls: one item per input, costing its token count (on a web replica, the queue's batcher:
   * its items are queue entries), for metrics and health; call the model through `embed` / `embedAll`.
   */
  readonly batcher: BatcherBase;
  readonly batchers: readonly BatcherBase[];
  readonly ready: Promise<void>;
  isReady(): boolean;
  /** A text's token ids as the model reads them (special tokens added); only once `ready`. */
  tokenize(text: string): number[];
  /**
   * Texts' token ids as the model reads them, tokenized on the service's tokenizer thread (never the caller's);
   * rejects with `BatchError('UNAVAILABLE')` until it is loaded.
   */
  encodeAll(texts: readonly string[]): Promise<number[][]>;
  /** Embeds token ids (a batched model call shared with concurrent inputs), pooled and normalised. */
  embed(ids: readonly number[], options?: CallOptions): Promise<Float32Array>;
  /** Group form of {@link embed}: admitted all together or refused together. */
  embedAll(ids: readonly (readonly number[])[], options?: CallOptions): Promise<Float32Array[]>;
  drain(): Promise<void>;
  close(): Promise<void>;
}
