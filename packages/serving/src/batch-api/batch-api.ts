// The Batch API of one app (text completion or embeddings): its stores on the storage (a data directory, or a
// broker's shared store), the endpoints its lines go through (the interactive ones, over the service at the lowest
// priority), and the runner, which resumes unfinished batches once the service is ready.
import { hostname } from 'node:os';
import type { IncomingMessage } from 'node:http';
import type { BatcherBase } from '@microbatch/core';
import type { HttpErrorOptions } from '@microbatch/core/http';
import type { EmbeddingsRequestLimits } from '../openai/embeddings-request.js';
import { createEmbeddingsEndpoint } from '../endpoints/embeddings-endpoint.js';
import type { EmbeddingService } from '../service/embedding-service.js';
import type { ChatRequestLimits } from '../openai/chat-request.js';
import type { CompletionRequestLimits } from '../openai/completion-request.js';
import { createChatCompletionsEndpoint } from '../endpoints/chat-endpoint.js';
import { createCompletionsEndpoint } from '../endpoints/completions-endpoint.js';
import type { TextCompletionService } from '../service/text-completion-service.js';
import { type BatchApiOptions, type ResolvedBatchApiOptions, resolveBatchApiOptions } from './batch-api-options.js';
import { type LineEndpoint, captureAnswer, lowPriorityEmbeddings, lowPriorityService } from './batch-lines.js';
import { BatchRunner } from './batch-runner.js';
import { SpareCapacity } from './spare-capacity.js';
import { type BatchEndpoint, BatchStore } from './batch-store.js';
import { FileStore } from './file-store.js';
import { openDiskBatchStorage } from './disk-storage.js';
import { newId } from './atomic-json.js';

/**
 * Batch lines running at once by default on an idle server: the batchers' slots less an eighth (at least 1), so an
 * interactive request that arrives finds a free slot, is dispatched at once and preempts the lines as its batch
 * starts; 8 where the slots are unbounded. As many as the loop can take: lines run only while no interactive request
 * does, so they no longer need to be few (bench:batch: 4 in flight made the batch half as fast as the same lines sent
 * interactively).
 *
 * @example
 * ```ts
 * defaultMaxInFlight(36); // 31: a continuous worker's 32 rows and its 4 waiting
 * ```
 */
export function defaultMaxInFlight(slots: number): number {
  if (!Number.isFinite(slots)) return 8;
  return Math.max(1, slots - Math.ceil(slots / 8));
}

/** What the Batch API's handlers read: the stores, the runner, the endpoints, the options. */
export interface BatchApi {
  /** Resolves once the stores are open (the handlers wait for it). */
  readonly ready: Promise<void>;
  readonly files: FileStore;
  readonly batches: BatchStore;
  readonly runner: BatchRunner;
  readonly endpoints: Partial<Record<BatchEndpoint, LineEndpoint>>;
  readonly options: ResolvedBatchApiOptions;
  /** The owner recorded for what `req` creates. */
  owner(req: IncomingMessage): string | null;
}

/**
 * The Batch API over a text-completion service: `/v1/completions` and `/v1/chat/completions` lines, answered by the
 * same endpoints (and `limits`) as interactive requests. Options are checked at once (`TypeError`); the stores open
 * in the background, and unfinished batches resume once the service is ready.
 *
 * @example
 * ```ts
 * const api = createTextCompletionBatchApi(service, { dataDir: '/var/lib/microbatch' }, {}, {});
 * ```
 */
export function createTextCompletionBatchApi(
  service: TextCompletionService,
  options: BatchApiOptions,
  limits: { readonly limits?: CompletionRequestLimits; readonly chatLimits?: ChatRequestLimits },
  errors: HttpErrorOptions,
): BatchApi {
  const resolved = resolveBatchApiOptions(options);
  const low = lowPriorityService(service);
  const completions = createCompletionsEndpoint(low, { limits: limits.limits ?? {}, ...errors });
  const chat = createChatCompletionsEndpoint(low, { limits: limits.chatLimits ?? {}, ...errors });
  return openBatchApi(resolved, {
    endpoints: {
      '/v1/completions': (body, signal) => captureAnswer(completions, body, signal),
      '/v1/chat/completions': (body, signal) => captureAnswer(chat, body, signal),
    },
    batchers: service.batchers,
    ready: service.ready,
    itemsInFlight: low.itemsInFlight,
  });
}

/**
 * The Batch API over an embedding service: `/v1/embeddings` lines, answered by the same endpoint (and `limits`) as
 * interactive requests.
 *
 * @example
 * ```ts
 * const api = createEmbeddingsBatchApi(model, { dataDir: '/var/lib/microbatch' }, {}, {});
 * ```
 */
export function createEmbeddingsBatchApi(
  service: EmbeddingService,
  options: BatchApiOptions,
  limits: EmbeddingsRequestLimits,
  errors: HttpErrorOptions,
): BatchApi {
  const resolved = resolveBatchApiOptions(options);
  const low = lowPriorityEmbeddings(service);
  const embeddings = createEmbeddingsEndpoint(low, { limits, ...errors });
  return openBatchApi(resolved, {
    endpoints: { '/v1/embeddings': (body, signal) => captureAnswer(embeddings, body, signal) },
    batchers: service.batchers,
    ready: service.ready,
    itemsInFlight: low.itemsInFlight,
  });
}

/** What a Batch API runs its lines on. */
interface BatchApiTarget {
  readonly endpoints: Partial<Record<BatchEndpoint, LineEndpoint>>;
  readonly batchers: readonly BatcherBase[];
  readonly ready: Promise<void>;
  readonly itemsInFlight: () => number;
}

function openBatchApi(resolved: ResolvedBatchApiOptions, target: BatchApiTarget): BatchApi {
  const { endpoints } = target;
  // Read at each decision when not set: a queue's batchers learn their slots from the workers' announcements.
  const maxInFlight =
    resolved.maxInFlight ??
    (() => defaultMaxInFlight(Math.min(...target.batchers.map((batcher) => batcher.maxConcurrentBatches))));
  let parts: { files: FileStore; batches: BatchStore; runner: BatchRunner } | undefined;
  const ready = (async () => {
    const { store } = resolved;
    const storage = 'storage' in store ? store.storage : await openDiskBatchStorage(store.dataDir);
    const files = new FileStore(storage, resolved.now);
    const batches = new BatchStore(storage.records, resolved.now);
    const runner = new BatchRunner({
      files,
      batches,
      storage,
      // Unique per process (a restarted replica is another holder: it waits for its old leases to lapse).
      holder: `${hostname()}-${process.pid}-${newId('')}`,
      leaseMs: resolved.leaseMs,
      endpoints,
      bounds: { maxLines: resolved.maxLines, maxLineBytes: resolved.maxLineBytes },
      gate: new SpareCapacity({ batchers: target.batchers, batchItemsInFlight: target.itemsInFlight, maxInFlight }),
      onError: (error) => console.error(error),
    });
    parts = { files, batches, runner };
  })();
  // Resumed once the model can answer (a line fed before would only be refused and retried).
  void Promise.all([ready, target.ready]).then(
    () => parts?.runner.resume(),
    () => undefined,
  );
  const get = <K extends 'files' | 'batches' | 'runner'>(key: K) => {
    if (parts === undefined) throw new Error('The Batch API is not open yet');
    return parts[key];
  };
  return {
    ready,
    get files() {
      return get('files');
    },
    get batches() {
      return get('batches');
    },
    get runner() {
      return get('runner');
    },
    endpoints,
    options: resolved,
    owner: (req) => resolved.principal?.(req) ?? null,
  };
}
