// What the brokers' Batch API stores (`openRedisBatchStorage`, `openNatsBatchStorage`) share: the checks of a port
// key and a record's value, and the reading side of `BlobStorage.put` (a source re-cut into chunks of a fixed size,
// counted against the caller's bound, and drained past it, so a multipart parser feeding it is not stalled), so each
// store only writes chunks and makes the blob visible once complete.
import { checkInteger, checkString, fail, isObjectLike } from '@microbatch/core/util';

/** A port key: a file or batch id, or a prefix of one, as the Batch API chooses them. */
const STORAGE_KEY = /^[A-Za-z0-9_-]{1,200}$/;

/**
 * Checks a key given to a store: `[A-Za-z0-9_-]`, 1 to 200 characters (`allowEmpty`: a `list` prefix may be '').
 * Stores use such keys as they are in their own names (Redis keys, KV keys, object names), so one that is not is a
 * programming error: a `TypeError`.
 *
 * @example
 * ```ts
 * checkStorageKey('key', 'batch_abc'); // 'batch_abc'
 * ```
 */
export function checkStorageKey(name: string, key: unknown, allowEmpty = false): string {
  if (typeof key === 'string' && (STORAGE_KEY.test(key) || (allowEmpty && key === ''))) return key;
  return fail(name, '1 to 200 characters of [A-Za-z0-9_-]', key);
}

/**
 * Checks a lease's holder (a non-empty string) and, for `acquire`, its ttl (a whole number of ms, at least 1).
 *
 * @example
 * ```ts
 * checkLease('replica-1', 30_000);
 * ```
 */
export function checkLease(holder: unknown, ttlMs?: unknown): void {
  checkString('holder', holder);
  if (ttlMs !== undefined) checkInteger('ttlMs', ttlMs, 1, Number.MAX_SAFE_INTEGER);
}

/**
 * Checks a result log entry: `customId` a non-empty string, `ok` a boolean, `line` a string.
 *
 * @example
 * ```ts
 * checkResultEntry({ customId: 'request-1', ok: true, line: '{"id":"batch_req_1"}' });
 * ```
 */
export function checkResultEntry(entry: unknown): void {
  if (!isObjectLike(entry)) fail('entry', 'an object', entry);
  const { customId, ok, line } = entry as Record<string, unknown>;
  checkString('entry.customId', customId);
  if (typeof ok !== 'boolean') fail('entry.ok', 'a boolean', ok);
  if (typeof line !== 'string') fail('entry.line', 'a string', line);
}

/**
 * A record's value as the JSON a store keeps; a value with no JSON form (`undefined`, a function) is a `TypeError`.
 *
 * @example
 * ```ts
 * recordJson({ id: 'batch_abc' }); // '{"id":"batch_abc"}'
 * ```
 */
export function recordJson(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError(`Expected \`value\` to be JSON, got ${typeof value}`);
  return text;
}

/**
 * A broker's URL without its user and password: a store's `description`, for logs.
 *
 * @example
 * ```ts
 * withoutCredentials('redis://user:secret@10.0.0.5:6379/2'); // 'redis://10.0.0.5:6379/2'
 * ```
 */
export function withoutCredentials(url: string): string {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.toString().replace(/\/$/, '');
}

/** Thrown by {@link BlobIntake.chunks} once the source is past the bound: the store drops what it wrote. */
export class BlobTooLarge extends Error {
  override readonly name = 'BlobTooLarge';
}

/**
 * One blob's source, read once: {@link chunks} yields it in chunks of `chunkBytes` (the last one shorter; an empty
 * source yields nothing) and throws {@link BlobTooLarge} as soon as more than `maxBytes` were read. After a throw,
 * {@link drain} reads the rest of the source without keeping it, so `bytes` is the source's whole size.
 *
 * @example
 * ```ts
 * const intake = new BlobIntake(source, maxBytes, 256 * 1024);
 * try {
 *   for await (const chunk of intake.chunks()) await write(chunk);
 * } catch (error) {
 *   await discard();
 *   if (!intake.tooLarge) throw error;
 *   await intake.drain();
 *   return { bytes: intake.bytes, tooLarge: true };
 * }
 * ```
 */
export class BlobIntake {
  readonly #source: AsyncIterator<Uint8Array>;
  readonly #maxBytes: number;
  readonly #chunkBytes: number;
  #bytes = 0;
  #tooLarge = false;
  #done = false;

  constructor(source: AsyncIterable<Uint8Array>, maxBytes: number, chunkBytes: number) {
    checkInteger('maxBytes', maxBytes, 0, Number.MAX_SAFE_INTEGER);
    checkInteger('chunkBytes', chunkBytes, 1, Number.MAX_SAFE_INTEGER);
    this.#source = source[Symbol.asyncIterator]();
    this.#maxBytes = maxBytes;
    this.#chunkBytes = chunkBytes;
  }

  /** Bytes read from the source so far (all of it once {@link drain} or {@link chunks} finished). */
  get bytes(): number {
    return this.#bytes;
  }

  /** Whether the source went past `maxBytes`. */
  get tooLarge(): boolean {
    return this.#tooLarge;
  }

  /** The source in chunks of `chunkBytes`; at most one chunk (plus one source piece) is held at a time. */
  async *chunks(): AsyncGenerator<Uint8Array> {
    let pending: Uint8Array[] = [];
    let pendingBytes = 0;
    for (;;) {
      const next = await this.#next();
      if (next === undefined) break;
      let piece = next;
      while (piece.length > 0) {
        const take = Math.min(piece.length, this.#chunkBytes - pendingBytes);
        pending.push(piece.subarray(0, take));
        pendingBytes += take;
        piece = piece.subarray(take);
        if (pendingBytes === this.#chunkBytes) {
          yield join(pending, pendingBytes);
          pending = [];
          pendingBytes = 0;
        }
      }
    }
    if (pendingBytes > 0) yield join(pending, pendingBytes);
  }

  /** Reads the rest of the source, keeping nothing (after {@link chunks} threw, or was left early). */
  async drain(): Promise<void> {
    while ((await this.#next()) !== undefined);
  }

  /** The next piece of the source (counted), `undefined` at its end; throws {@link BlobTooLarge} past the bound. */
  async #next(): Promise<Uint8Array | undefined> {
    if (this.#done) return undefined;
    const { done, value } = await this.#source.next();
    if (done === true) {
      this.#done = true;
      return undefined;
    }
    this.#bytes += value.length;
    if (this.#bytes <= this.#maxBytes) return value;
    if (!this.#tooLarge) {
      this.#tooLarge = true;
      throw new BlobTooLarge(`The blob is larger than ${this.#maxBytes} bytes`);
    }
    return new Uint8Array(0);
  }
}

/**
 * `BlobStorage.put` over a store's own writing: `write` stores `source`'s chunks (of `chunkBytes`) and makes the
 * blob visible once complete. If it throws, `discard` drops what it wrote; past `maxBytes` the rest of the source is
 * read and the answer is `tooLarge` (any other failure is thrown).
 *
 * @example
 * ```ts
 * return putBlob(source, maxBytes, 256 * 1024, async (chunks) => { for await (const chunk of chunks) await push(chunk); });
 * ```
 */
export async function putBlob(
  source: AsyncIterable<Uint8Array>,
  maxBytes: number,
  chunkBytes: number,
  write: (chunks: AsyncGenerator<Uint8Array>) => Promise<void>,
  discard: () => Promise<void> = async () => undefined,
): Promise<{ bytes: number; tooLarge: boolean }> {
  const intake = new BlobIntake(source, maxBytes, chunkBytes);
  try {
    await write(intake.chunks());
    return { bytes: intake.bytes, tooLarge: false };
  } catch (error) {
    await discard();
    if (!intake.tooLarge) throw error;
    await intake.drain();
    return { bytes: intake.bytes, tooLarge: true };
  }
}

function join(pieces: readonly Uint8Array[], bytes: number): Uint8Array {
  if (pieces.length === 1) return pieces[0] as Uint8Array;
  const joined = new Uint8Array(bytes);
  let at = 0;
  for (const piece of pieces) {
    joined.set(piece, at);
    at += piece.length;
  }
  return joined;
}
