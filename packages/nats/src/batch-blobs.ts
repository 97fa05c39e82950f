// The Batch API's blobs (uploaded files, output files) in a JetStream Object Store. An object exists only once its
// metadata is written, after its last chunk; a put that fails (a failing source, one too large, NATS gone) purges
// the chunks it wrote, so a torn upload is never visible. Reading goes through a pull consumer (subject-reader.ts)
// rather than the store's own `get` (a push consumer that would queue the whole object for a slow reader), and
// checks the object's size and SHA-256 digest at its end.
import { createHash } from 'node:crypto';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { ObjectInfo, ObjectStore } from '@nats-io/obj';
import { type BlobStorage, checkStorageKey, putBlob } from '@microbatch/transport';
import { readSubject } from './subject-reader.js';

/** The size of a stored chunk (the Object Store's default; under NATS's default 1 MiB message bound). */
export const OBJECT_CHUNK_BYTES = 128 * 1024;

/**
 * {@link BlobStorage} on a JetStream Object Store bucket.
 *
 * @example
 * ```ts
 * const blobs = new NatsBlobs(store, js, manager, 'microbatch_batch_blobs');
 * await blobs.put('file-abc', request, 100 * 1024 * 1024);
 * ```
 */
export class NatsBlobs implements BlobStorage {
  readonly #store: ObjectStore;
  readonly #js: JetStreamClient;
  readonly #manager: JetStreamManager;
  readonly #bucket: string;

  constructor(store: ObjectStore, js: JetStreamClient, manager: JetStreamManager, bucket: string) {
    this.#store = store;
    this.#js = js;
    this.#manager = manager;
    this.#bucket = bucket;
  }

  async put(
    key: string,
    source: AsyncIterable<Uint8Array>,
    maxBytes: number,
  ): Promise<{ bytes: number; tooLarge: boolean }> {
    checkStorageKey('key', key);
    return putBlob(source, maxBytes, OBJECT_CHUNK_BYTES, async (chunks) => {
      // Pulled one chunk at a time (no read-ahead): the store publishes each before it asks for the next.
      const stream = new ReadableStream<Uint8Array>(
        {
          async pull(controller) {
            const { done, value } = await chunks.next();
            if (done === true) controller.close();
            else controller.enqueue(value);
          },
          async cancel() {
            await chunks.return(undefined);
          },
        },
        { highWaterMark: 0 },
      );
      await this.#store.put({ name: key, options: { max_chunk_size: OBJECT_CHUNK_BYTES } }, stream);
    });
  }

  async get(key: string): Promise<AsyncIterable<Uint8Array> | undefined> {
    checkStorageKey('key', key);
    const info = await this.#store.info(key);
    if (info === null || info.deleted) return undefined;
    return this.#read(info);
  }

  async delete(key: string): Promise<void> {
    checkStorageKey('key', key);
    await this.#store.delete(key);
  }

  /** The object's chunks in order; fails at its end if they are not the object (deleted while read, corrupt). */
  async *#read(info: ObjectInfo): AsyncGenerator<Uint8Array> {
    if (info.size === 0) return;
    const hash = createHash('sha256');
    let size = 0;
    const chunks = readSubject(this.#js, this.#manager, `OBJ_${this.#bucket}`, `$O.${this.#bucket}.C.${info.nuid}`);
    for await (const message of chunks) {
      hash.update(message.data);
      size += message.data.length;
      yield message.data;
    }
    const digest = `SHA-256=${hash.digest('base64url')}`;
    if (size !== info.size || digest !== info.digest.replace(/=+$/, ''))
      throw new Error(`Object ${info.name} changed or was deleted while it was read`);
  }
}
