// The sequence-classifier service contract: what the rerank, score and classify endpoints serve, whichever model runs
// behind it (`createSequenceClassifier`: worker threads of this process). One model per service, so a registry of
// models can hold several side by side.
import type { BatcherBase, CallOptions } from '@microbatch/core';
import type { OnnxInput } from '@microbatch/inference';

/** One tokenized text or text pair: its ids (special tokens included) and, for BERT-style models, segment ids. */
export type ClassifierItem = OnnxInput;

/**
 * What a sequence classifier serves: `text-classification` (`POST /classify`: label probabilities per text) or
 * `rerank` (a cross-encoder: `POST /v1/rerank`, `/rerank`, `/v1/score`: one relevance score per text pair).
 *
 * @example
 * ```ts
 * const task: ClassifierTask = 'rerank';
 * ```
 */
export type ClassifierTask = 'text-classification' | 'rerank';

/**
 * A sequence-classification model (or cross-encoder) behind a batcher: what the classify, rerank and score
 * endpoints serve.
 *
 * @example
 * ```ts
 * const { items } = await service.encodeAll(['hello']);
 * const [probabilities] = await service.classifyAll(items);
 * ```
 */
export interface ClassifierService {
  /** The name responses report as `model`. */
  readonly id: string;
  readonly task: ClassifierTask;
  /** The labels in id order (`config.json`'s `id2label`). */
  readonly labels: readonly string[];
  /** The most tokens one text (or pair) may have (`max_position_embeddings`). */
  readonly maxTokens: number;
  /** The most items waiting in the batcher: one request's items are admitted together, so at most this many. */
  readonly maxQueueSize: number;
  /**
   * The batcher of model calls: one item per text or pair, costing its token count (on a web replica, the queue's
   * batcher), for metrics and health; call the model through `classifyAll` / `scoreAll`.
   */
  readonly batcher: BatcherBase;
  readonly batchers: readonly BatcherBase[];
  readonly ready: Promise<void>;
  isReady(): boolean;
  /**
   * Tokenizes texts (with `pairs`, each text with its pair, as a cross-encoder reads them: `[CLS] a [SEP] b [SEP]`)
   * on the service's tokenizer thread, never the caller's, stopping at the first text that takes the total past
   * `maxTotal` tokens (`stoppedAt`: its index).
   */
  encodeAll(
    texts: readonly string[],
    options?: { readonly pairs?: readonly string[]; readonly maxTotal?: number },
  ): Promise<{ readonly items: ClassifierItem[]; readonly stoppedAt: number | undefined }>;
  /** The token count of a tokenized item. */
  tokens(item: ClassifierItem): number;
  /**
   * Each item's label probabilities, in label order: softmax over the logits (sigmoid per label for
   * `multi_label_classification`, or for a one-label model). Admitted all together or refused together.
   */
  classifyAll(items: readonly ClassifierItem[], options?: CallOptions): Promise<Float32Array[]>;
  /** Each pair's relevance: the sigmoid of a cross-encoder's one logit. Admitted all together or refused together. */
  scoreAll(items: readonly ClassifierItem[], options?: CallOptions): Promise<number[]>;
  drain(): Promise<void>;
  close(): Promise<void>;
}
