// The storage port of the OpenAI Batch API (`@microbatch/serving`'s `batch-api/`): the few primitives every store
// gives (a local data directory, Redis keys and streams, NATS JetStream KV and Object Store), so the Files and Batch
// semantics (ids, owners, statuses, validation, resume, exactly one line per custom_id) are written once, above
// it. Keys are plain strings of `[A-Za-z0-9_-]` chosen by the Batch API (a file or batch id, a prefix of one); a
// store maps them to its own names (a path, a key under its prefix, a subject-safe KV key).

/**
 * Byte blobs: uploaded files and finished output files. A blob is written whole from a stream and then never
 * changed; it exists (for `get`) only once all its bytes are stored.
 */
export interface BlobStorage {
  /**
   * Stores `source` as blob `key`, never holding it whole in memory. Past `maxBytes` nothing more is kept, the
   * source is still read to its end (so a multipart parser feeding it is not stalled), nothing is left stored, and
   * the result is `{ tooLarge: true }`. A source that fails leaves nothing stored and rejects.
   */
  put(key: string, source: AsyncIterable<Uint8Array>, maxBytes: number): Promise<{ bytes: number; tooLarge: boolean }>;
  /** Blob `key`'s bytes as a stream of chunks, or `undefined` when there is none. */
  get(key: string): Promise<AsyncIterable<Uint8Array> | undefined>;
  /** Removes blob `key` (none: nothing happens). */
  delete(key: string): Promise<void>;
}

/** Small JSON records (file objects, batch objects) by key. Each `put` replaces the record whole, atomically. */
export interface RecordStorage {
  get<T>(key: string): Promise<T | undefined>;
  put(key: string, value: unknown): Promise<void>;
  /** Stores `value` only when `key` has no record; whether it did (the first of two racing creators wins). */
  create(key: string, value: unknown): Promise<boolean>;
  delete(key: string): Promise<void>;
  /** Every record whose key starts with `prefix`, in no particular order. */
  list<T>(prefix: string): Promise<T[]>;
}

/** One entry of a result log: the line written (OpenAI's output line, JSON) and whether it was a success. */
export interface ResultEntry {
  readonly customId: string;
  readonly ok: boolean;
  readonly line: string;
}

/**
 * A batch's results, one entry per custom_id: the first entry written for a custom_id is kept, any later one for
 * the same custom_id is dropped (two replicas that both ran a line, or a line run again after a crash, still give
 * exactly one result).
 */
export interface ResultLogStorage {
  /** Appends `entry` to log `log` unless its custom_id has one; whether it was appended. */
  append(log: string, entry: ResultEntry): Promise<boolean>;
  /** The log's entries in the order they were appended (a torn last entry, after a crash, is not one). */
  read(log: string): AsyncIterable<ResultEntry>;
  /** How many successes and failures the log holds. */
  counts(log: string): Promise<{ readonly ok: number; readonly failed: number }>;
  /** Removes log `log`. */
  delete(log: string): Promise<void>;
}

/**
 * Leases: which process runs a batch. A lease not renewed within its time lapses, so a batch whose runner was
 * killed is taken up by another (or the restarted) process.
 */
export interface LeaseStorage {
  /** Takes lease `key` for `holder` (or renews it, when `holder` has it) for `ttlMs`; whether `holder` has it now. */
  acquire(key: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives lease `key` up if `holder` has it. */
  release(key: string, holder: string): Promise<void>;
}

/**
 * Where the Batch API keeps its files, batches and results.
 *
 * @example
 * ```ts
 * const storage: BatchStorage = await openRedisBatchStorage({ url: 'redis://127.0.0.1:6379' });
 * await storage.records.put('batch_abc', { status: 'validating' });
 * ```
 */
export interface BatchStorage {
  /** What the store is, for logs (`data directory /var/lib/x`, `redis://host:6379`); never a password. */
  readonly description: string;
  /** Whether several processes can share it (a broker: yes; a local directory: one process at a time). */
  readonly shared: boolean;
  readonly blobs: BlobStorage;
  readonly records: RecordStorage;
  readonly results: ResultLogStorage;
  readonly leases: LeaseStorage;
  /** Releases the store's connections (a store given a connection it does not own leaves it open). */
  close(): Promise<void>;
}
