// The Batch API's small state in JetStream KV: records (file and batch objects, one key each), result logs (a key
// per custom_id, written with `create` so the first write wins; read back in the order the stream stored them) and
// leases (the holder and its ttl, changed only by revision: compare-and-set).
import { createHash, randomUUID } from 'node:crypto';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { KV, KvEntry } from '@nats-io/kv';
import {
  type BlobStorage,
  type RecordStorage,
  type ResultEntry,
  type ResultLogStorage,
  checkResultEntry,
  checkStorageKey,
  recordJson,
} from '@microbatch/transport';
import { readSubject } from './subject-reader.js';

/** Gets run at once by `list` (one request each). */
const LIST_GETS = 32;
/** Result logs whose counts an instance remembers (so `counts` reads only what was appended since). */
const COUNTED_LOGS = 1_024;
/**
 * An entry's value past this many bytes is kept as a blob, its KV entry holding only the blob's key: a KV value is
 * one NATS message, bounded by the server's `max_payload` (1 MiB by default), and one answer can be larger (an
 * embeddings request of many inputs).
 */
export const SPILL_BYTES = 256 * 1024;

/** A log entry's KV value: the entry, or where its line was spilled. */
interface StoredEntry {
  readonly customId: string;
  readonly ok: boolean;
  readonly line?: string;
  readonly spill?: string;
}

/** Whether a KV write lost its compare-and-set (the key's revision moved, or it exists for `create`). */
export function isConflict(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
      error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

/** The value of a live entry (a delete leaves a marker, which is no value). */
export function liveValue(entry: KvEntry | null): KvEntry | undefined {
  return entry !== null && entry.operation === 'PUT' ? entry : undefined;
}

/**
 * {@link RecordStorage} on a KV bucket: the port's keys are valid KV keys as they are.
 *
 * @example
 * ```ts
 * await new NatsRecords(kv).create('batch_abc', batch); // true: the first
 * ```
 */
export class NatsRecords implements RecordStorage {
  readonly #kv: KV;

  constructor(kv: KV) {
    this.#kv = kv;
  }

  async get<T>(key: string): Promise<T | undefined> {
    return liveValue(await this.#kv.get(checkStorageKey('key', key)))?.json<T>();
  }

  async put(key: string, value: unknown): Promise<void> {
    await this.#kv.put(checkStorageKey('key', key), recordJson(value));
  }

  async create(key: string, value: unknown): Promise<boolean> {
    try {
      await this.#kv.create(checkStorageKey('key', key), recordJson(value));
      return true;
    } catch (error) {
      if (isConflict(error)) return false;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await this.#kv.delete(checkStorageKey('key', key));
  }

  /**
   * KV filters match whole dot-separated tokens, and a port key is one token, so a prefix of characters is matched
   * here, over the bucket's keys (the server sends keys only, not values); the matching records are then read.
   */
  async list<T>(prefix: string): Promise<T[]> {
    checkStorageKey('prefix', prefix, true);
    const keys: string[] = [];
    for await (const key of await this.#kv.keys()) if (key.startsWith(prefix)) keys.push(key);
    const found: T[] = [];
    for (let at = 0; at < keys.length; at += LIST_GETS) {
      const entries = await Promise.all(keys.slice(at, at + LIST_GETS).map((key) => this.#kv.get(key)));
      for (const entry of entries) {
        const live = liveValue(entry);
        if (live !== undefined) found.push(live.json<T>());
      }
    }
    return found;
  }
}

/**
 * {@link ResultLogStorage} on a KV bucket: entry `<log>.<SHA-256 of the custom_id, base64url>` (any client string
 * becomes one subject-safe token; the custom_id itself is in the value), written with `create`. A log is read from
 * the bucket's stream under `<log>.>`, in stream order: the order of the appends.
 *
 * @example
 * ```ts
 * await new NatsResultLogs(kv, js, manager, 'microbatch_batch_results').append('batch_abc', { customId: 'a', ok: true, line });
 * ```
 */
export class NatsResultLogs implements ResultLogStorage {
  readonly #kv: KV;
  readonly #js: JetStreamClient;
  readonly #manager: JetStreamManager;
  readonly #bucket: string;
  readonly #spills: BlobStorage;
  /** Per log: the last stream sequence counted and the counts up to it. */
  readonly #counted = new Map<string, { last: number; ok: number; failed: number }>();

  /** `spills` keeps the lines too large for a KV value (see {@link SPILL_BYTES}). */
  constructor(kv: KV, js: JetStreamClient, manager: JetStreamManager, bucket: string, spills: BlobStorage) {
    this.#kv = kv;
    this.#js = js;
    this.#manager = manager;
    this.#bucket = bucket;
    this.#spills = spills;
  }

  async append(log: string, entry: ResultEntry): Promise<boolean> {
    checkStorageKey('log', log);
    checkResultEntry(entry);
    const { customId, ok, line } = entry;
    const id = createHash('sha256').update(customId).digest('base64url');
    let value = JSON.stringify({ customId, ok, line } satisfies StoredEntry);
    let spill: string | undefined;
    if (Buffer.byteLength(value) > SPILL_BYTES) {
      // A key of its own per attempt: two racing writers never share a blob, and the loser deletes its own.
      spill = `${log}_spill_${randomUUID()}`;
      const bytes = Buffer.from(line);
      await this.#spills.put(spill, once(bytes), bytes.length);
      value = JSON.stringify({ customId, ok, spill } satisfies StoredEntry);
    }
    try {
      await this.#kv.create(`${log}.${id}`, value);
      return true;
    } catch (error) {
      if (spill !== undefined) await this.#spills.delete(spill);
      if (isConflict(error)) return false;
      throw error;
    }
  }

  async *read(log: string): AsyncIterable<ResultEntry> {
    for await (const { entry } of this.#entries(checkStorageKey('log', log), 1)) {
      if (entry.spill === undefined) {
        yield { customId: entry.customId, ok: entry.ok, line: entry.line ?? '' };
        continue;
      }
      const chunks = await this.#spills.get(entry.spill);
      if (chunks === undefined)
        throw new Error(`The line of ${JSON.stringify(entry.customId)} in log ${log} is missing`);
      const parts: Buffer[] = [];
      for await (const chunk of chunks) parts.push(Buffer.from(chunk));
      yield { customId: entry.customId, ok: entry.ok, line: Buffer.concat(parts).toString('utf8') };
    }
  }

  /** Counted once per instance: later calls read only the entries appended since (a log only grows). */
  async counts(log: string): Promise<{ readonly ok: number; readonly failed: number }> {
    checkStorageKey('log', log);
    let known = this.#counted.get(log);
    // A deleted log (purged, perhaps by another instance) no longer has the last entry counted: count it again.
    if (known !== undefined && (await this.#manager.streams.getMessage(this.#stream, { seq: known.last })) === null)
      known = undefined;
    let { last, ok, failed } = known ?? { last: 0, ok: 0, failed: 0 };
    for await (const { entry, seq } of this.#entries(log, last + 1)) {
      if (entry.ok) ok += 1;
      else failed += 1;
      last = seq;
    }
    this.#counted.delete(log);
    if (last > 0) this.#counted.set(log, { last, ok, failed });
    if (this.#counted.size > COUNTED_LOGS) this.#counted.delete(this.#counted.keys().next().value as string);
    return { ok, failed };
  }

  async delete(log: string): Promise<void> {
    checkStorageKey('log', log);
    this.#counted.delete(log);
    for await (const { entry } of this.#entries(log, 1))
      if (entry.spill !== undefined) await this.#spills.delete(entry.spill);
    await this.#manager.streams.purge(this.#stream, { filter: `$KV.${this.#bucket}.${log}.>` });
  }

  get #stream(): string {
    return `KV_${this.#bucket}`;
  }

  async *#entries(log: string, from: number): AsyncGenerator<{ entry: StoredEntry; seq: number }> {
    for await (const message of readSubject(
      this.#js,
      this.#manager,
      this.#stream,
      `$KV.${this.#bucket}.${log}.>`,
      from,
    )) {
      // Entries are only ever created; a marker (an operator's delete) is no entry.
      if (message.headers?.get('KV-Operation') || message.data.length === 0) continue;
      yield { entry: message.json<StoredEntry>(), seq: message.seq };
    }
  }
}

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}
