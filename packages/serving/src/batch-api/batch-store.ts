// The Batch API's batches, on its storage: each batch's object a record (rewritten whole at each change of status
// or counts), and beside it, once a cancel is asked for, a cancel mark no runner's save can overwrite. After a
// restart (or a replica's death, on a broker) the batches not yet ended are found here and resumed.
import type { RecordStorage } from '@microbatch/transport';
import { isId, newId, unixSeconds } from './atomic-json.js';

/** The endpoints a batch may target (OpenAI's, those this server serves). */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** OpenAI's batch statuses. */
export type BatchStatus =
  | 'validating'
  | 'failed'
  | 'in_progress'
  | 'finalizing'
  | 'completed'
  | 'expired'
  | 'cancelling'
  | 'cancelled';

/** The statuses a batch ends in: nothing changes it afterwards. */
export const ENDED: ReadonlySet<BatchStatus> = new Set(['failed', 'completed', 'expired', 'cancelled']);

/** One problem of a batch's input file, naming its line (1-based) where there is one. */
export interface BatchInputError {
  readonly code: string;
  readonly message: string;
  readonly param: string | null;
  readonly line: number | null;
}

/**
 * OpenAI's batch object, as `GET /v1/batches/{id}` answers it.
 *
 * @example
 * ```ts
 * batch.status === 'completed' && batch.output_file_id; // the results
 * ```
 */
export interface BatchObject {
  readonly id: string;
  readonly object: 'batch';
  readonly endpoint: BatchEndpoint;
  readonly errors: { readonly object: 'list'; readonly data: readonly BatchInputError[] } | null;
  readonly input_file_id: string;
  readonly completion_window: '24h';
  readonly status: BatchStatus;
  readonly output_file_id: string | null;
  readonly error_file_id: string | null;
  readonly created_at: number;
  readonly in_progress_at: number | null;
  readonly expires_at: number;
  readonly finalizing_at: number | null;
  readonly completed_at: number | null;
  readonly failed_at: number | null;
  readonly expired_at: number | null;
  readonly cancelling_at: number | null;
  readonly cancelled_at: number | null;
  readonly request_counts: { readonly total: number; readonly completed: number; readonly failed: number };
  readonly metadata: Readonly<Record<string, string>> | null;
}

/** A batch as stored: its object, its owner, and the ms it expires at (finer than the object's seconds). */
export interface StoredBatch {
  readonly batch: BatchObject;
  readonly owner: string | null;
  readonly expiresAtMs: number;
  /** Milliseconds since the epoch when it was created, to order batches made within one second. */
  readonly createdAtMs: number;
  /**
   * The ids its output and error files get and the counts they hold, chosen when it is finalized (so a restart, or
   * another replica, finishing it keeps them).
   */
  readonly plannedFiles?: {
    readonly output: string;
    readonly errors: string;
    readonly completed: number;
    readonly failed: number;
  };
}

const BATCH_PREFIX = 'batch_';

/** The cancel mark's key: another prefix, so listing batches never lists marks. */
const cancelKey = (id: string): string => `cancel_${id}`;

/**
 * Batches on the Batch API's storage.
 *
 * @example
 * ```ts
 * const batches = new BatchStore(storage.records);
 * ```
 */
export class BatchStore {
  readonly #records: RecordStorage;
  readonly #now: () => number;

  constructor(records: RecordStorage, now: () => number = Date.now) {
    this.#records = records;
    this.#now = now;
  }

  /** A new batch in `validating`, recorded before it is answered. */
  async create(input: {
    readonly endpoint: BatchEndpoint;
    readonly inputFileId: string;
    readonly metadata: Readonly<Record<string, string>> | null;
    readonly owner: string | null;
    readonly windowMs: number;
  }): Promise<StoredBatch> {
    const id = newId(BATCH_PREFIX);
    const now = this.#now();
    const stored: StoredBatch = {
      batch: {
        id,
        object: 'batch',
        endpoint: input.endpoint,
        errors: null,
        input_file_id: input.inputFileId,
        completion_window: '24h',
        status: 'validating',
        output_file_id: null,
        error_file_id: null,
        created_at: unixSeconds(now),
        in_progress_at: null,
        expires_at: unixSeconds(now + input.windowMs),
        finalizing_at: null,
        completed_at: null,
        failed_at: null,
        expired_at: null,
        cancelling_at: null,
        cancelled_at: null,
        request_counts: { total: 0, completed: 0, failed: 0 },
        metadata: input.metadata,
      },
      owner: input.owner,
      expiresAtMs: now + input.windowMs,
      createdAtMs: now,
    };
    await this.save(stored);
    return stored;
  }

  /** Writes `stored` whole (atomically). */
  save(stored: StoredBatch): Promise<void> {
    return this.#records.put(stored.batch.id, stored);
  }

  /** Batch `id`, or `undefined` (an id of another shape is never looked up). */
  async get(id: string): Promise<StoredBatch | undefined> {
    if (!isId(BATCH_PREFIX, id)) return undefined;
    return this.#records.get<StoredBatch>(id);
  }

  /** Every batch, newest first (ties by id, so pages are stable). */
  async list(): Promise<StoredBatch[]> {
    const batches = await this.#records.list<StoredBatch>(BATCH_PREFIX);
    return batches.sort((a, b) => b.createdAtMs - a.createdAtMs || (a.batch.id < b.batch.id ? -1 : 1));
  }

  /**
   * Marks batch `id` to be cancelled. The mark is its own record: the replica running the batch rewrites the batch's
   * record with its counts, and could overwrite a `cancelling` written between its read and its write; the mark
   * stays, and the runner reads it before each save.
   */
  async markCancel(id: string): Promise<void> {
    await this.#records.create(cancelKey(id), { at: this.#now() });
  }

  /** Whether a cancel of batch `id` was asked for (by any replica). */
  async cancelMarked(id: string): Promise<boolean> {
    return (await this.#records.get(cancelKey(id))) !== undefined;
  }

  /** Removes batch `id`'s cancel mark (once it ended). */
  clearCancel(id: string): Promise<void> {
    return this.#records.delete(cancelKey(id));
  }

  /** The time now, in ms, on the store's clock. */
  now(): number {
    return this.#now();
  }
}
