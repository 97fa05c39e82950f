// The Batch API's options (where it keeps its state: `--data-dir`, or a broker's storage; and its bounds), their
// checks and defaults.
import type { IncomingMessage } from 'node:http';
import type { BatchStorage } from '@microbatch/transport';
import { checkOptionalFunction, fail } from '@microbatch/core/util';

/**
 * Options of the Files and Batch APIs (`/v1/files`, `/v1/batches`) of the text-completion apps.
 *
 * @example
 * ```ts
 * createTextCompletionApp(model, { batchApi: { dataDir: '/var/lib/microbatch' } });
 * ```
 */
export interface BatchApiOptions {
  /**
   * The local folder where files, batches and their results are kept (one process at a time); a restart on the same
   * folder resumes unfinished batches. Exactly one of `dataDir` and `storage`.
   */
  readonly dataDir?: string;
  /**
   * A shared store for them instead (`openRedisBatchStorage`, `openNatsBatchStorage`): every replica on it answers
   * for every batch, and runs any batch whose runner died. The caller opens and closes it. Exactly one of `dataDir`
   * and `storage`.
   */
  readonly storage?: BatchStorage;
  /**
   * With a shared `storage`: how long a replica's hold on a batch it runs lasts unrenewed (renewed every third of
   * it); a batch whose replica died is taken up by another after at most about twice this.
   * @default 10000
   */
  readonly leaseMs?: number;
  /**
   * Bytes of one uploaded file; a larger upload is refused with 413.
   * @default 104857600 (100 MiB)
   */
  readonly maxFileBytes?: number;
  /**
   * Requests of one batch (OpenAI's bound).
   * @default 50000
   */
  readonly maxLines?: number;
  /**
   * Bytes of one line of a batch's input file; a longer line fails the batch's validation, naming it.
   * @default 1048576 (1 MiB)
   */
  readonly maxLineBytes?: number;
  /**
   * Files kept at once (uploads and batch results); an upload past it is refused (400) until some are deleted.
   * @default 10000
   */
  readonly maxFiles?: number;
  /**
   * Batches not yet ended at once; a new batch past it is refused with 503 `QUEUE_FULL` and `Retry-After`.
   * @default 100
   */
  readonly maxActiveBatches?: number;
  /**
   * Batch lines running at once, across every batch, on an otherwise idle server, and never more than the service's
   * batchers have free slots. None runs beside interactive requests: the lines running when one arrives are
   * preempted (aborted, and fed again once the server has been idle for a moment).
   * @default the service's `maxConcurrentBatches` less an eighth (at least 1; 8 when unbounded)
   */
  readonly maxInFlight?: number;
  /**
   * Who a request is from (an API key's name), kept as the `owner` of the files and batches it creates: a request
   * sees (gets, lists, cancels, deletes, reads, uses as input) only what its own principal created; another's ids
   * answer 404 as if they did not exist. The apps set it from the request's API key (`principalOf`).
   * @default none: `owner` is `null`, one space shared by every caller (an app without API keys)
   */
  readonly principal?: (req: IncomingMessage) => string | undefined;
  /** The clock (ms since the epoch): tests move it past a batch's window. @default Date.now */
  readonly now?: () => number;
}

/** The options with their defaults, checked: a bad value throws a `TypeError` naming it. */
export interface ResolvedBatchApiOptions {
  /** Where the state is: a folder to open, or a store given. */
  readonly store: { readonly dataDir: string } | { readonly storage: BatchStorage };
  readonly leaseMs: number;
  readonly maxFileBytes: number;
  readonly maxLines: number;
  readonly maxLineBytes: number;
  readonly maxInFlight: number | undefined;
  readonly maxFiles: number;
  readonly maxActiveBatches: number;
  readonly principal: ((req: IncomingMessage) => string | undefined) | undefined;
  readonly now: () => number;
}

function positiveInteger(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) fail(name, 'a positive integer', value);
  return value;
}

/**
 * Checks `options` (a `TypeError` naming the first bad one) and fills the defaults.
 *
 * @example
 * ```ts
 * resolveBatchApiOptions({ dataDir: '/tmp/mb' }).maxLines; // 50000
 * ```
 */
export function resolveBatchApiOptions(options: BatchApiOptions): ResolvedBatchApiOptions {
  if (typeof options !== 'object' || options === null) fail('batchApi', 'an object', options);
  const known = new Set([
    'dataDir',
    'storage',
    'leaseMs',
    'maxFileBytes',
    'maxLines',
    'maxLineBytes',
    'maxInFlight',
    'maxFiles',
    'maxActiveBatches',
    'principal',
    'now',
  ]);
  for (const key of Object.keys(options)) if (!known.has(key)) fail(`batchApi.${key}`, 'a known option', key);
  const { dataDir, storage } = options;
  if ((dataDir === undefined) === (storage === undefined)) {
    throw new TypeError('batchApi needs exactly one of `dataDir` (a local folder) and `storage` (a shared store)');
  }
  if (dataDir !== undefined && (typeof dataDir !== 'string' || dataDir === '')) {
    fail('batchApi.dataDir', 'a non-empty path', dataDir);
  }
  if (storage !== undefined && !isStorage(storage)) {
    fail('batchApi.storage', 'a BatchStorage (blobs, records, results, leases)', storage);
  }
  if (options.leaseMs !== undefined && storage?.shared !== true) {
    throw new TypeError('batchApi.leaseMs has no effect without a shared `storage` (one process owns a `dataDir`)');
  }
  checkOptionalFunction('batchApi.principal', options.principal);
  checkOptionalFunction('batchApi.now', options.now);
  return {
    store: storage === undefined ? { dataDir: dataDir as string } : { storage },
    leaseMs: positiveInteger('batchApi.leaseMs', options.leaseMs, 10_000),
    maxFileBytes: positiveInteger('batchApi.maxFileBytes', options.maxFileBytes, 100 * 1024 * 1024),
    maxLines: positiveInteger('batchApi.maxLines', options.maxLines, 50_000),
    maxLineBytes: positiveInteger('batchApi.maxLineBytes', options.maxLineBytes, 1024 * 1024),
    maxInFlight:
      options.maxInFlight === undefined ? undefined : positiveInteger('batchApi.maxInFlight', options.maxInFlight, 1),
    maxFiles: positiveInteger('batchApi.maxFiles', options.maxFiles, 10_000),
    maxActiveBatches: positiveInteger('batchApi.maxActiveBatches', options.maxActiveBatches, 100),
    principal: options.principal,
    now: options.now ?? Date.now,
  };
}

function isStorage(value: unknown): value is BatchStorage {
  if (typeof value !== 'object' || value === null) return false;
  const store = value as Partial<Record<keyof BatchStorage, unknown>>;
  return (
    typeof store.shared === 'boolean' &&
    typeof store.close === 'function' &&
    ['blobs', 'records', 'results', 'leases'].every((part) => typeof store[part as keyof BatchStorage] === 'object')
  );
}
