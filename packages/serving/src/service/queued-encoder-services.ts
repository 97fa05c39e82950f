// Encoder services whose model runs elsewhere, on queue workers (`microbatch serve --task ... --queue`): the
// `EmbeddingService` and `ClassifierService` the same endpoints and apps serve. The replica holds the folder's
// tokenizer and `config.json` only: texts and pairs are tokenized on its tokenizer thread, so every bound (inputs,
// documents, pair tokens) is checked and every item's cost known before anything is queued; a request's items go to
// the queue as one group (`callAll`: all admitted or all refused, by the broker), and the workers answer each item.
import type { Batcher, FleetLoad } from '@microbatch/core';
import { checkInteger, checkOneOf, checkString, fail } from '@microbatch/core/util';
import { createTokenizerThreads } from '@microbatch/inference';
import type { ClassifierItem, ClassifierService, ClassifierTask } from './classifier-service.js';
import { type EncoderFolder, type EncoderTask, readEncoderFolder } from './encoder-folder.js';
import {
  ENCODER_HANDLERS,
  type EmbedAnswer,
  type EmbedEntry,
  type LogitsAnswer,
  floatsFromWire,
} from './encoder-wire.js';
import { POOLINGS, type Pooling } from './embedding-pooling.js';
import { embeddingTokenizing } from './embedding-tokenizing.js';
import type { EmbeddingService } from './embedding-service.js';
import { labelProbabilities, sigmoid } from './label-scores.js';
import { ReplicaAdmission } from './replica-admission.js';

/**
 * A queue that encoder replicas send items to (`@microbatch/redis`'s `createRedisQueue`, `@microbatch/nats`'s
 * `createNatsQueue`).
 *
 * @example
 * ```ts
 * const queue: EncoderQueue = createRedisQueue({ url, queue: 'all-MiniLM-L6-v2' });
 * ```
 */
export interface EncoderQueue {
  readonly ready: Promise<void>;
  batcher<I, O>(name: string): Batcher<I, O>;
  /** Connected to the broker now. */
  isConnected(): boolean;
  /** The last sample of the queue: how many workers are alive. */
  snapshot(): { readonly workersAlive: number };
  /** The fleet's load: needed for `maxLatencyMs`. */
  load?(): FleetLoad;
  close(): Promise<void>;
}

/**
 * Options of {@link createQueuedEmbeddingService} and {@link createQueuedSequenceClassifier}.
 *
 * @example
 * ```ts
 * const options: QueuedEncoderOptions = { model: 'models/all-MiniLM-L6-v2', maxLatencyMs: 2000 };
 * ```
 */
export interface QueuedEncoderOptions {
  /** The model folder: its `config.json` and `tokenizer.json` are read here; the graph is the workers'. */
  readonly model: string;
  /**
   * The name responses report as `model`.
   * @default the folder's name
   */
  readonly id?: string;
  /**
   * Refuse at once (503 `OVERLOADED`) a request the fleet is predicted to answer later than this many ms (see
   * `ReplicaAdmission`; the queue must have `load()`).
   * @default Infinity (no prediction)
   */
  readonly maxLatencyMs?: number;
}

/**
 * Options of {@link createQueuedEmbeddingService}.
 *
 * @example
 * ```ts
 * const options: QueuedEmbeddingOptions = { model: 'models/all-MiniLM-L6-v2', pooling: 'cls' };
 * ```
 */
export interface QueuedEmbeddingOptions extends QueuedEncoderOptions {
  /** @default read from `1_Pooling/config.json`, else 'mean' */
  readonly pooling?: Pooling;
  /** @default true where `modules.json` lists a Normalize module or there is no `modules.json`, else false */
  readonly normalize?: boolean;
  /** @default false */
  readonly truncatableDimensions?: boolean;
}

/**
 * Options of {@link createQueuedSequenceClassifier}.
 *
 * @example
 * ```ts
 * const options: QueuedClassifierOptions = { model: 'models/ms-marco-MiniLM-L-6-v2', task: 'rerank', maxQueueSize: 1024 };
 * ```
 */
export interface QueuedClassifierOptions extends QueuedEncoderOptions {
  /** @default 'text-classification' */
  readonly task?: ClassifierTask;
  /**
   * The queue's bound across replicas (its own `maxQueueSize`): one request's items are one group, so the rerank
   * endpoint's `maxDocuments` is kept at most this.
   * @default 1024
   */
  readonly maxQueueSize?: number;
}

/** What both queued services share: the folder, the (guarded) batcher, the tokenizer thread, readiness, close. */
function queuedParts<I, O>(queue: EncoderQueue, options: QueuedEncoderOptions, task: EncoderTask) {
  if (typeof queue?.batcher !== 'function' || typeof queue.snapshot !== 'function') {
    fail('queue', 'a queue with `batcher()` and `snapshot()`, such as `createRedisQueue()`', queue);
  }
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  const folder: EncoderFolder = readEncoderFolder(checkString('model', options.model), task);
  if (options.id !== undefined) checkString('id', options.id);
  let batcher = queue.batcher<I, O>(ENCODER_HANDLERS[task]);
  const { maxLatencyMs } = options;
  if (maxLatencyMs !== undefined && maxLatencyMs !== Number.POSITIVE_INFINITY) {
    if (typeof queue.load !== 'function') {
      throw new TypeError(
        "`maxLatencyMs` needs a queue with `load()` (the fleet's latency fits), such as `createRedisQueue()`",
      );
    }
    batcher = new ReplicaAdmission(maxLatencyMs, () => queue.load!()).guard(batcher);
  }
  const tokenizer = createTokenizerThreads(folder.dir);
  const drain = () => batcher.close();
  return {
    folder,
    id: options.id ?? folder.name,
    batcher,
    tokenizer,
    ready: (extra: Promise<unknown>) => {
      const ready = Promise.all([queue.ready, tokenizer.ready, extra]).then(() => undefined);
      ready.catch(() => undefined);
      return ready;
    },
    // The queue's last sample (every 50 ms): synchronous, as the probes and the Batch API read it.
    isReady: () => tokenizer.isReady() && !batcher.closed && queue.isConnected() && queue.snapshot().workersAlive > 0,
    drain,
    close: async () => {
      await drain();
      await Promise.all([queue.close(), tokenizer.close()]);
    },
  };
}

/**
 * An embedding service whose model runs on queue workers (`microbatch worker --task feature-extraction`): texts are
 * tokenized here, each input is one entry (its ids, pooling and normalisation), a request's inputs one group.
 *
 * @example
 * ```ts
 * const service = createQueuedEmbeddingService(createRedisQueue({ url, queue: 'all-MiniLM-L6-v2' }), { model: dir });
 * await startEmbeddingsApp(service, { port: 8000, host: '127.0.0.1' });
 * ```
 */
export function createQueuedEmbeddingService(queue: EncoderQueue, options: QueuedEmbeddingOptions): EmbeddingService {
  // Checked before the tokenizer thread starts; the folder's own pooling is checked as it is read.
  if (options?.pooling !== undefined) checkOneOf('pooling', options.pooling, POOLINGS);
  const parts = queuedParts<EmbedEntry, EmbedAnswer>(queue, options, 'feature-extraction');
  const { folder, batcher, tokenizer } = parts;
  const pooling = options.pooling ?? folder.pooling ?? 'mean';
  const normalize = options.normalize ?? folder.normalize ?? true;
  const entry = (ids: readonly number[]): EmbedEntry => ({
    input_ids: ids,
    ...(folder.withTypes ? { token_type_ids: ids.map(() => 0) } : {}),
    pooling,
    normalize,
  });
  const vector = (answer: EmbedAnswer) => floatsFromWire(answer?.embedding, folder.dimensions);
  const tokenizing = embeddingTokenizing(folder.dir, tokenizer, 'The tokenizer is still loading');
  return {
    id: parts.id,
    dimensions: folder.dimensions,
    maxTokens: folder.maxTokens,
    vocabSize: folder.vocabSize,
    pooling,
    normalize,
    truncatableDimensions: options.truncatableDimensions ?? false,
    batcher,
    batchers: [batcher],
    ready: parts.ready(tokenizing.loaded),
    isReady: () => tokenizing.isLoaded() && parts.isReady(),
    tokenize: tokenizing.tokenize,
    encodeAll: tokenizing.encodeAll,
    embed: async (ids, call) => vector(await batcher(entry(ids), call)),
    embedAll: async (all, call) => (await batcher.callAll(all.map(entry), call)).map(vector),
    drain: parts.drain,
    close: parts.close,
  };
}

/**
 * A sequence classifier (or cross-encoder, `task: 'rerank'`) whose model runs on queue workers (`microbatch worker
 * --task rerank|text-classification`): texts and pairs are tokenized here, each is one entry, a request's one group;
 * the workers answer logits, turned into probabilities or relevance scores here as transformers.js does.
 *
 * @example
 * ```ts
 * const reranker = createQueuedSequenceClassifier(createNatsQueue({ url, queue: 'ms-marco-MiniLM-L-6-v2' }), { model: dir, task: 'rerank' });
 * await startEncoderApp(reranker, { port: 8000, host: '127.0.0.1' });
 * ```
 */
export function createQueuedSequenceClassifier(
  queue: EncoderQueue,
  options: QueuedClassifierOptions,
): ClassifierService {
  const task = checkOneOf('task', options?.task ?? 'text-classification', ['text-classification', 'rerank'] as const);
  const maxQueueSize = checkInteger('maxQueueSize', options?.maxQueueSize ?? 1024, 1);
  const parts = queuedParts<ClassifierItem, LogitsAnswer>(queue, options, task);
  const { folder, batcher, tokenizer } = parts;
  const logitsOf = (answer: LogitsAnswer): readonly number[] => {
    const logits = answer?.logits;
    if (!Array.isArray(logits) || logits.length !== folder.labels.length) {
      throw new Error(`Expected a worker's ${folder.labels.length} logits, got ${JSON.stringify(logits)}`);
    }
    return logits;
  };
  const tokens = (item: ClassifierItem) => (item.input_ids as readonly number[]).length;
  return {
    id: parts.id,
    task,
    labels: folder.labels,
    maxTokens: folder.maxTokens,
    maxQueueSize,
    batcher,
    batchers: [batcher],
    ready: parts.ready(Promise.resolve()),
    isReady: parts.isReady,
    encodeAll: async (texts, encodeOptions) => {
      const { encodings, stoppedAt } = await tokenizer.encodeAll(texts, encodeOptions);
      const items = encodings.map(({ ids, typeIds }): ClassifierItem =>
        folder.withTypes ? { input_ids: ids, token_type_ids: typeIds } : { input_ids: ids },
      );
      return { items, stoppedAt };
    },
    tokens,
    classifyAll: async (items, call) =>
      (await batcher.callAll(items, call)).map((answer) => labelProbabilities(logitsOf(answer), folder.activation)),
    scoreAll: async (items, call) =>
      (await batcher.callAll(items, call)).map((answer) => sigmoid(logitsOf(answer)[0] as number)),
    drain: parts.drain,
    close: parts.close,
  };
}
