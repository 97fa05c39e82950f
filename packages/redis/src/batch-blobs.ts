// The Batch API's blobs (uploaded files, output files) in Redis: a list of chunks per blob. An upload is pushed
// chunk by chunk under a key of its own that expires unless written to, then renamed to the blob's key in one step
// once complete, so a torn upload (a crash, a failing source, one too large) is never visible and never stays.
import { randomUUID } from 'node:crypto';
import { type BlobStorage, checkStorageKey, putBlob } from '@microbatch/transport';
import type { BatchKeys } from './batch-keys.js';
import { FINISH_UPLOAD, PUSH_CHUNK } from './batch-keys.js';
import type { RedisCommands } from './batch-commands.js';

/** The size of a stored chunk: one command each, small enough not to stall Redis for other clients. */
export const BLOB_CHUNK_BYTES = 256 * 1024;
/** Chunks read per `LRANGE` by `get` (1 MiB): what a reader holds at most. */
const CHUNKS_PER_READ = 4;
/** An upload not written to for this long is dropped by Redis (its writer died). */
const UPLOAD_TTL_MS = 60 * 60 * 1000;

/**
 * {@link BlobStorage} on Redis lists.
 *
 * @example
 * ```ts
 * const blobs = new RedisBlobs(commands, batchKeys('microbatch'));
 * await blobs.put('file-abc', request, 100 * 1024 * 1024);
 * ```
 */
export class RedisBlobs implements BlobStorage {
  readonly #redis: RedisCommands;
  readonly #keys: BatchKeys;

  constructor(redis: RedisCommands, keys: BatchKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async put(
    key: string,
    source: AsyncIterable<Uint8Array>,
    maxBytes: number,
  ): Promise<{ bytes: number; tooLarge: boolean }> {
    checkStorageKey('key', key);
    const upload = this.#keys.upload(key, randomUUID());
    const ttl = String(UPLOAD_TTL_MS);
    return putBlob(
      source,
      maxBytes,
      BLOB_CHUNK_BYTES,
      async (stored) => {
        let chunks = 0;
        for await (const chunk of stored) {
          await this.#redis.script(PUSH_CHUNK, [upload], [asBuffer(chunk), ttl, String(chunks)]);
          chunks += 1;
        }
        // A list cannot be empty in Redis: an empty blob is one empty chunk.
        if (chunks === 0) {
          await this.#redis.script(PUSH_CHUNK, [upload], ['', ttl, '0']);
          chunks = 1;
        }
        await this.#redis.script(FINISH_UPLOAD, [upload, this.#keys.blob(key)], [String(chunks)]);
      },
      async () => {
        await this.#redis.send(['DEL', upload]).catch(() => undefined);
      },
    );
  }

  async get(key: string): Promise<AsyncIterable<Uint8Array> | undefined> {
    checkStorageKey('key', key);
    const blob = this.#keys.blob(key);
    const length = Number(await this.#redis.send(['LLEN', blob]));
    if (length === 0) return undefined;
    return this.#read(blob, length);
  }

  async delete(key: string): Promise<void> {
    checkStorageKey('key', key);
    await this.#redis.send(['DEL', this.#keys.blob(key)]);
  }

  /** The chunks of `blob` (`length` of them), a page at a time; a blob deleted while read fails the stream. */
  async *#read(blob: string, length: number): AsyncGenerator<Uint8Array> {
    for (let start = 0; start < length; start += CHUNKS_PER_READ) {
      const stop = Math.min(start + CHUNKS_PER_READ, length) - 1;
      const page = await this.#redis.buffers(['LRANGE', blob, String(start), String(stop)]);
      if (page.length !== stop - start + 1) throw new Error(`Blob ${blob} was deleted while it was read`);
      for (const chunk of page) if (chunk.length > 0) yield chunk;
    }
  }
}

function asBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}
