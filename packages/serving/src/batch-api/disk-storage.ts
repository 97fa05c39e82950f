// The Batch API's embedded storage (`--data-dir`): the storage port on one local folder, for one process at a time
// (`shared: false`). Blobs are files written to a part file and renamed whole; records are JSON files replaced
// atomically; a result log is one JSONL file appended one entry at a time, whose torn last line (a SIGKILL
// mid-append) is cut off when it is first opened; leases are kept in the process (no other shares the folder).
import { createReadStream, createWriteStream } from 'node:fs';
import { appendFile, link, mkdir, readFile, readdir, rename, rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pipeline } from 'node:stream/promises';
import type {
  BatchStorage,
  BlobStorage,
  LeaseStorage,
  RecordStorage,
  ResultEntry,
  ResultLogStorage,
} from '@microbatch/transport';
import { newId, readJsonRecord, writeJsonAtomic } from './atomic-json.js';

/** What a key may be: it becomes a file name, so nothing else (no `/`, no `..`) ever reaches a path. */
const KEY = /^[A-Za-z0-9_-]{1,200}$/;

function checkKey(key: string): string {
  if (typeof key !== 'string' || !KEY.test(key)) {
    throw new TypeError(`A Batch API storage key must be 1 to 200 of [A-Za-z0-9_-], got ${JSON.stringify(key)}`);
  }
  return key;
}

const isMissing = (error: unknown): boolean => (error as { code?: unknown } | null)?.code === 'ENOENT';

/**
 * The storage of the Batch API on the local folder `dataDir` (created if missing): `blobs/`, `records/`,
 * `results/`.
 *
 * @example
 * ```ts
 * const storage = await openDiskBatchStorage('/var/lib/microbatch');
 * await storage.records.put('batch_abc', { status: 'validating' });
 * ```
 */
export async function openDiskBatchStorage(dataDir: string): Promise<BatchStorage> {
  const dirs = { blobs: join(dataDir, 'blobs'), records: join(dataDir, 'records'), results: join(dataDir, 'results') };
  for (const dir of Object.values(dirs)) await mkdir(dir, { recursive: true });
  return {
    description: `data directory ${dataDir}`,
    shared: false,
    blobs: diskBlobs(dirs.blobs),
    records: diskRecords(dirs.records),
    results: new DiskResultLogs(dirs.results),
    leases: processLeases(),
    close: async () => undefined,
  };
}

/**
 * Leases within this process: one process owns the folder, so its one runner always gets them; kept honest all the
 * same (one holder at a time, lapsing when not renewed), so the port's contract holds here too.
 */
function processLeases(now: () => number = Date.now): LeaseStorage {
  const held = new Map<string, { readonly holder: string; readonly until: number }>();
  return {
    async acquire(key, holder, ttlMs) {
      const lease = held.get(checkKey(key));
      if (lease !== undefined && lease.holder !== holder && now() < lease.until) return false;
      held.set(key, { holder, until: now() + ttlMs });
      return true;
    },
    async release(key, holder) {
      if (held.get(key)?.holder === holder) held.delete(key);
    },
  };
}

function diskBlobs(dir: string): BlobStorage {
  const path = (key: string): string => join(dir, `${checkKey(key)}.data`);
  return {
    async put(key, source, maxBytes) {
      const target = path(key);
      const part = join(dir, `${key}.${newId('')}.part`);
      let bytes = 0;
      try {
        await pipeline(
          source,
          // Past the bound nothing more is written, but the source is read to its end (see the port).
          async function* (chunks: AsyncIterable<Uint8Array>) {
            for await (const chunk of chunks) {
              bytes += chunk.length;
              if (bytes <= maxBytes) yield chunk;
            }
          },
          createWriteStream(part),
        );
      } catch (error) {
        await rm(part, { force: true });
        throw error;
      }
      if (bytes > maxBytes) {
        await rm(part, { force: true });
        return { bytes, tooLarge: true };
      }
      await rename(part, target);
      return { bytes, tooLarge: false };
    },
    async get(key) {
      const target = path(key);
      try {
        await stat(target);
      } catch (error) {
        if (isMissing(error)) return undefined;
        throw error;
      }
      return createReadStream(target) as AsyncIterable<Uint8Array>;
    },
    async delete(key) {
      await rm(path(key), { force: true });
    },
  };
}

function diskRecords(dir: string): RecordStorage {
  const path = (key: string): string => join(dir, `${checkKey(key)}.json`);
  return {
    get: <T>(key: string) => readJsonRecord<T>(path(key)),
    put: (key, value) => writeJsonAtomic(path(key), value),
    async create(key, value) {
      const target = path(key);
      const temporary = `${target}.${newId('')}.tmp`;
      await writeJsonAtomic(temporary, value);
      try {
        // A hard link fails if the record exists: the first of two creators wins, atomically.
        await link(temporary, target);
        return true;
      } catch (error) {
        if ((error as { code?: unknown }).code === 'EEXIST') return false;
        throw error;
      } finally {
        await rm(temporary, { force: true });
      }
    },
    async delete(key) {
      await rm(path(key), { force: true });
    },
    async list<T>(prefix: string) {
      const records: T[] = [];
      for (const name of await readdir(dir)) {
        if (!name.startsWith(prefix) || !name.endsWith('.json') || name.slice(0, -5).includes('.')) continue;
        const record = await readJsonRecord<T>(join(dir, name));
        if (record !== undefined) records.push(record);
      }
      return records;
    },
  };
}

/** One open result log: the custom_ids it holds, its counts, and the appends in order. */
interface OpenLog {
  readonly done: Set<string>;
  ok: number;
  failed: number;
  tail: Promise<unknown>;
}

/** Result logs as JSONL files, one {@link ResultEntry} a line, each opened once (torn last line cut) then cached. */
class DiskResultLogs implements ResultLogStorage {
  readonly #dir: string;
  readonly #open = new Map<string, Promise<OpenLog>>();

  constructor(dir: string) {
    this.#dir = dir;
  }

  async append(log: string, entry: ResultEntry): Promise<boolean> {
    const state = await this.#state(log);
    if (state.done.has(entry.customId)) return false;
    state.done.add(entry.customId);
    const text = `${JSON.stringify({ customId: entry.customId, ok: entry.ok, line: entry.line })}\n`;
    const write = state.tail.then(() => appendFile(this.#path(log), text));
    state.tail = write.catch(() => undefined);
    try {
      await write;
    } catch (error) {
      state.done.delete(entry.customId);
      throw error;
    }
    if (entry.ok) state.ok += 1;
    else state.failed += 1;
    return true;
  }

  async *read(log: string): AsyncIterable<ResultEntry> {
    const state = await this.#state(log);
    await state.tail;
    // Line by line: a batch's output (thousands of embeddings) is never held whole while its file is written.
    const lines = createInterface({ input: createReadStream(this.#path(log)), crlfDelay: Number.POSITIVE_INFINITY });
    try {
      for await (const line of lines) if (line !== '') yield JSON.parse(line) as ResultEntry;
    } catch (error) {
      if (!isMissing(error)) throw error;
    } finally {
      lines.close();
    }
  }

  async counts(log: string): Promise<{ readonly ok: number; readonly failed: number }> {
    const { ok, failed } = await this.#state(log);
    return { ok, failed };
  }

  async delete(log: string): Promise<void> {
    const state = this.#open.get(log);
    if (state !== undefined) await (await state).tail;
    this.#open.delete(log);
    await rm(this.#path(log), { force: true });
  }

  #path(log: string): string {
    return join(this.#dir, `${checkKey(log)}.jsonl`);
  }

  #state(log: string): Promise<OpenLog> {
    let state = this.#open.get(log);
    if (state === undefined) {
      state = this.#load(log);
      this.#open.set(log, state);
      state.catch(() => this.#open.delete(log));
    }
    return state;
  }

  /** The log as a previous process left it: a torn last line (killed mid-append) is cut off; its line runs again. */
  async #load(log: string): Promise<OpenLog> {
    const path = this.#path(log);
    const state: OpenLog = { done: new Set(), ok: 0, failed: 0, tail: Promise.resolve() };
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      if (isMissing(error)) return state;
      throw error;
    }
    const end = text.lastIndexOf('\n') + 1;
    if (end < text.length) await truncate(path, Buffer.byteLength(text.slice(0, end)));
    for (const line of text.slice(0, end).split('\n')) {
      if (line === '') continue;
      const entry = JSON.parse(line) as ResultEntry;
      if (state.done.has(entry.customId)) continue;
      state.done.add(entry.customId);
      if (entry.ok) state.ok += 1;
      else state.failed += 1;
    }
    return state;
  }
}
