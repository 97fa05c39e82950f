// The Batch API's embedded store: each batch's object in `<dataDir>/batches/<id>.json` (rewritten whole at each
// change of status or counts), and its results appended, as lines finish, to `<id>/output.jsonl` and
// `<id>/errors.jsonl`. After a restart the batches not yet ended are found here and resumed.
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isId, newId, readJsonRecord, unixSeconds, writeJsonAtomic } from './atomic-json.js';

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
  /** The ids its output and error files get, chosen when it is finalized (so a restart then keeps them). */
  readonly plannedFiles?: { readonly output: string; readonly errors: string };
}

const BATCH_PREFIX = 'batch_';

/**
 * Batches on local disk under `<dataDir>/batches`.
 *
 * @example
 * ```ts
 * const batches = await BatchStore.open('/var/lib/microbatch');
 * ```
 */
export class BatchStore {
  readonly #dir: string;
  readonly #now: () => number;

  private constructor(dir: string, now: () => number) {
    this.#dir = dir;
    this.#now = now;
  }

  /** The store under `<dataDir>/batches`, created if missing. */
  static async open(dataDir: string, now: () => number = Date.now): Promise<BatchStore> {
    const dir = join(dataDir, 'batches');
    await mkdir(dir, { recursive: true });
    return new BatchStore(dir, now);
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
    await mkdir(this.workDir(id), { recursive: true });
    await this.save(stored);
    return stored;
  }

  /** Writes `stored` whole (atomically). */
  save(stored: StoredBatch): Promise<void> {
    return writeJsonAtomic(join(this.#dir, `${stored.batch.id}.json`), stored);
  }

  /** Batch `id`, or `undefined` (an id of another shape is never looked up on disk). */
  async get(id: string): Promise<StoredBatch | undefined> {
    if (!isId(BATCH_PREFIX, id)) return undefined;
    return readJsonRecord<StoredBatch>(join(this.#dir, `${id}.json`));
  }

  /** Every batch, newest first (ties by id, so pages are stable). */
  async list(): Promise<StoredBatch[]> {
    const batches: StoredBatch[] = [];
    for (const name of await readdir(this.#dir)) {
      if (!name.endsWith('.json')) continue;
      const stored = await readJsonRecord<StoredBatch>(join(this.#dir, name));
      if (stored !== undefined) batches.push(stored);
    }
    return batches.sort((a, b) => b.createdAtMs - a.createdAtMs || (a.batch.id < b.batch.id ? -1 : 1));
  }

  /** Where batch `id`'s results are appended while it runs. */
  workDir(id: string): string {
    return join(this.#dir, id);
  }

  /** The time now, in ms, on the store's clock. */
  now(): number {
    return this.#now();
  }
}
