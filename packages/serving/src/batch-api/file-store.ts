// The Files API's store, on the Batch API's storage: each file's bytes a blob and its object a record written
// last, so a file exists (is listed, served) only once its bytes are all stored; an upload cut short, or a batch's
// output not yet finalized, is never served as a file.
import type { BatchStorage } from '@microbatch/transport';
import { BatchError } from '@microbatch/core';
import { isId, newId, unixSeconds } from './atomic-json.js';

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

/** An upload stored as a blob that is not a file yet (see {@link FileStore.receive}). */
export interface PendingFile {
  readonly id: string;
  readonly bytes: number;
}

/** No bound on a file the server writes itself (a batch's output, already bounded by its input). */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/**
 * Files on the Batch API's storage, for the Files API and the batches that read and write them.
 *
 * @example
 * ```ts
 * const files = new FileStore(await openDiskBatchStorage('/var/lib/microbatch'));
 * const pending = await files.receive(stream, 1e8);
 * const stored = await files.commit(pending, { filename: 'in.jsonl', purpose: 'batch', owner: null });
 * ```
 */
export class FileStore {
  readonly #storage: BatchStorage;
  readonly #now: () => number;

  constructor(storage: BatchStorage, now: () => number = Date.now) {
    this.#storage = storage;
    this.#now = now;
  }

  /**
   * Stores `source` as a blob (never held in memory whole), not yet a file: {@link commit} makes it one,
   * {@link discard} removes it. Past `maxBytes` nothing is kept and `ITEM_TOO_LARGE` (413) thrown; a source that
   * fails leaves nothing behind.
   */
  async receive(source: AsyncIterable<Uint8Array>, maxBytes: number): Promise<PendingFile> {
    const id = newId(FILE_PREFIX);
    const { bytes, tooLarge } = await this.#storage.blobs.put(id, source, maxBytes);
    if (tooLarge) {
      throw new BatchError('ITEM_TOO_LARGE', `The file is larger than ${maxBytes} bytes`, {
        details: { field: 'file', limit: maxBytes },
      });
    }
    return { id, bytes };
  }

  /** Makes a received blob a stored file. */
  commit(pending: PendingFile, meta: FileMeta): Promise<StoredFile> {
    return this.#record(pending.id, pending.bytes, meta);
  }

  /** Removes a received blob that will not be a file. */
  async discard(pending: PendingFile): Promise<void> {
    await this.#storage.blobs.delete(pending.id);
  }

  /** A new file id, chosen before a batch's output is written under it (so a restart finds it). */
  newId(): string {
    return newId(FILE_PREFIX);
  }

  /**
   * Stores `source` (a batch's output, written by the server) as file `id`; a second call with the same id answers
   * the file the first made, reading nothing.
   */
  async adopt(id: string, source: () => AsyncIterable<Uint8Array>, meta: FileMeta): Promise<StoredFile> {
    // Idempotent: a finalization cut short (or run by two replicas) is finished by the next one.
    const existing = await this.get(id);
    if (existing !== undefined) return existing;
    const { bytes } = await this.#storage.blobs.put(id, source(), UNBOUNDED);
    return this.#record(id, bytes, meta);
  }

  async #record(id: string, bytes: number, meta: FileMeta): Promise<StoredFile> {
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
    // Written last: the file exists once this record does (the first of two finalizers wins).
    if (await this.#storage.records.create(id, stored)) return stored;
    return (await this.get(id)) ?? stored;
  }

  /** The stored file `id`, or `undefined` (an id of another shape is never looked up). */
  async get(id: string): Promise<StoredFile | undefined> {
    if (!isId(FILE_PREFIX, id)) return undefined;
    return this.#storage.records.get<StoredFile>(id);
  }

  /** Every stored file, newest first (ties by id, so pages are stable). */
  async list(): Promise<StoredFile[]> {
    const files = await this.#storage.records.list<StoredFile>(FILE_PREFIX);
    return files.sort((a, b) => b.file.created_at - a.file.created_at || (a.file.id < b.file.id ? -1 : 1));
  }

  /** How many files are stored. */
  async count(): Promise<number> {
    return (await this.#storage.records.list(FILE_PREFIX)).length;
  }

  /** The bytes of stored file `id`, streamed (`undefined` once its blob is gone). */
  openContent(id: string): Promise<AsyncIterable<Uint8Array> | undefined> {
    return this.#storage.blobs.get(id);
  }

  /** Removes file `id`: its record first, so it is gone for readers before its bytes are. */
  async delete(id: string): Promise<boolean> {
    if (!isId(FILE_PREFIX, id)) return false;
    const existed = (await this.get(id)) !== undefined;
    await this.#storage.records.delete(id);
    await this.#storage.blobs.delete(id);
    return existed;
  }
}
