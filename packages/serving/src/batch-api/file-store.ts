// The Files API's embedded store: each file's bytes in `<dir>/files/<id>.data` and its object in `<id>.json`,
// written last, so a file exists (is listed, served) only once its bytes are all on disk; an upload cut short, or a
// batch's output not yet finalized, is never served as a file.
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BatchError } from '@microbatch/core';
import { isId, newId, readJsonRecord, unixSeconds, writeJsonAtomic } from './atomic-json.js';

/** The purposes a stored file may have: uploaded batch input, and a batch's output and error files. */
export type FilePurpose = 'batch' | 'batch_output';

/**
 * OpenAI's file object, as `GET /v1/files/{id}` answers it.
 *
 * @example
 * ```ts
 * const file: FileObject = { id: 'file-…', object: 'file', bytes: 120, created_at: 1700000000, filename: 'in.jsonl', purpose: 'batch', status: 'processed', status_details: null };
 * ```
 */
export interface FileObject {
  readonly id: string;
  readonly object: 'file';
  readonly bytes: number;
  readonly created_at: number;
  readonly filename: string;
  readonly purpose: FilePurpose;
  readonly status: 'processed';
  readonly status_details: null;
}

/** What is stored beside a file object: who owns it (the request's principal, when one is known). */
export interface StoredFile {
  readonly file: FileObject;
  /** The principal that uploaded it (an API key's id), `null` when the server knows none. */
  readonly owner: string | null;
}

const FILE_PREFIX = 'file-';

/** What a stored file is recorded with. */
export interface FileMeta {
  readonly filename: string;
  readonly purpose: FilePurpose;
  readonly owner: string | null;
}

/** An upload on disk that is not a file yet (see {@link FileStore.receive}). */
export interface PendingFile {
  readonly id: string;
  readonly path: string;
  readonly bytes: number;
}

/**
 * Files on local disk under `dir`, for the Files API and the batches that read and write them.
 *
 * @example
 * ```ts
 * const files = await FileStore.open('/var/lib/microbatch');
 * const pending = await files.receive(stream, 1e8);
 * const stored = await files.commit(pending, { filename: 'in.jsonl', purpose: 'batch', owner: null });
 * ```
 */
export class FileStore {
  readonly #dir: string;
  readonly #now: () => number;

  private constructor(dir: string, now: () => number) {
    this.#dir = dir;
    this.#now = now;
  }

  /** The store under `<dataDir>/files`, created if missing. */
  static async open(dataDir: string, now: () => number = Date.now): Promise<FileStore> {
    const dir = join(dataDir, 'files');
    await mkdir(dir, { recursive: true });
    return new FileStore(dir, now);
  }

  /**
   * Streams `source` to a part file (never held in memory whole), not yet a file: {@link commit} makes it one,
   * {@link discard} removes it. Past `maxBytes` the part is removed and `ITEM_TOO_LARGE` (413) thrown; a source that
   * fails leaves nothing behind.
   */
  async receive(source: Readable, maxBytes: number): Promise<PendingFile> {
    const id = newId(FILE_PREFIX);
    const path = join(this.#dir, `${id}.part`);
    let bytes = 0;
    try {
      await pipeline(
        source,
        // Past the bound nothing more is written, but the source is read to its end: destroying it mid-way would
        // stall a multipart parser still feeding it, and the client would never get its 413.
        async function* (chunks: AsyncIterable<Buffer>) {
          for await (const chunk of chunks) {
            bytes += chunk.length;
            if (bytes <= maxBytes) yield chunk;
          }
        },
        createWriteStream(path),
      );
    } catch (error) {
      await rm(path, { force: true });
      throw error;
    }
    if (bytes > maxBytes) {
      await rm(path, { force: true });
      throw new BatchError('ITEM_TOO_LARGE', `The file is larger than ${maxBytes} bytes`, {
        details: { field: 'file', limit: maxBytes },
      });
    }
    return { id, path, bytes };
  }

  /** Makes a received part a stored file. */
  commit(pending: PendingFile, meta: FileMeta): Promise<StoredFile> {
    return this.#record(pending.id, pending.path, pending.bytes, meta);
  }

  /** Removes a received part that will not be a file. */
  async discard(pending: PendingFile): Promise<void> {
    await rm(pending.path, { force: true });
  }

  /** A new file id, chosen before a batch's output is adopted under it (so a restart finds it). */
  newId(): string {
    return newId(FILE_PREFIX);
  }

  /**
   * Records a file already written whole at `path` (a batch's output) as file `id`, moving it into the store; a
   * second call with the same id answers the file the first made.
   */
  async adopt(id: string, path: string, meta: FileMeta): Promise<StoredFile> {
    // Idempotent: a finalization cut short after the move is finished by the next one.
    const existing = await this.get(id);
    if (existing !== undefined) return existing;
    const { size } = await stat(path);
    return this.#record(id, path, size, meta);
  }

  async #record(id: string, path: string, bytes: number, meta: FileMeta): Promise<StoredFile> {
    await rename(path, this.#dataPath(id));
    const stored: StoredFile = {
      file: {
        id,
        object: 'file',
        bytes,
        created_at: unixSeconds(this.#now()),
        filename: meta.filename,
        purpose: meta.purpose,
        status: 'processed',
        status_details: null,
      },
      owner: meta.owner,
    };
    // Written last: the file exists once this record does.
    await writeJsonAtomic(this.#metaPath(id), stored);
    return stored;
  }

  /** The stored file `id`, or `undefined` (an id of another shape is never looked up on disk). */
  async get(id: string): Promise<StoredFile | undefined> {
    if (!isId(FILE_PREFIX, id)) return undefined;
    return readJsonRecord<StoredFile>(this.#metaPath(id));
  }

  /** Every stored file, newest first (ties by id, so pages are stable). */
  async list(): Promise<StoredFile[]> {
    const names = await readdir(this.#dir);
    const files: StoredFile[] = [];
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      const stored = await readJsonRecord<StoredFile>(join(this.#dir, name));
      if (stored !== undefined) files.push(stored);
    }
    return files.sort((a, b) => b.file.created_at - a.file.created_at || (a.file.id < b.file.id ? -1 : 1));
  }

  /** How many files are stored. */
  async count(): Promise<number> {
    return (await readdir(this.#dir)).filter((name) => name.endsWith('.json')).length;
  }

  /** The bytes of stored file `id`, streamed. */
  openContent(id: string): Readable {
    return createReadStream(this.#dataPath(id));
  }

  /** The path of stored file `id`'s bytes, for a batch reading its input. */
  contentPath(id: string): string {
    return this.#dataPath(id);
  }

  /** Removes file `id`: its record first, so it is gone for readers before its bytes are. */
  async delete(id: string): Promise<boolean> {
    if (!isId(FILE_PREFIX, id)) return false;
    const existed = (await this.get(id)) !== undefined;
    await rm(this.#metaPath(id), { force: true });
    await rm(this.#dataPath(id), { force: true });
    return existed;
  }

  #metaPath(id: string): string {
    return join(this.#dir, `${id}.json`);
  }

  #dataPath(id: string): string {
    return join(this.#dir, `${id}.data`);
  }
}
