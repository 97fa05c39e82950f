// The Batch API's small state in Redis: records (file and batch objects) with their prefix index, result logs
// (first write per custom_id wins, in one script), and leases (which process runs a batch). Keys: batch-keys.ts.
import {
  type LeaseStorage,
  type RecordStorage,
  type ResultEntry,
  type ResultLogStorage,
  checkLease,
  checkResultEntry,
  checkStorageKey,
  recordJson,
} from '@microbatch/transport';
import {
  ACQUIRE_LEASE,
  APPEND_RESULT,
  type BatchKeys,
  DELETE_RECORD,
  PUT_RECORD,
  RELEASE_LEASE,
} from './batch-keys.js';
import type { RedisCommands } from './batch-commands.js';

/** Keys per `ZRANGEBYLEX` (and values per `MGET`) when listing records; entries per `LRANGE` when reading a log. */
const PAGE = 256;

/**
 * {@link RecordStorage} on Redis strings, indexed for `list` in one sorted set.
 *
 * @example
 * ```ts
 * await new RedisRecords(commands, batchKeys('microbatch')).create('batch_abc', batch); // true: the first
 * ```
 */
export class RedisRecords implements RecordStorage {
  readonly #redis: RedisCommands;
  readonly #keys: BatchKeys;

  constructor(redis: RedisCommands, keys: BatchKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async get<T>(key: string): Promise<T | undefined> {
    const json = await this.#redis.send(['GET', this.#keys.record(checkStorageKey('key', key))]);
    return typeof json === 'string' ? (JSON.parse(json) as T) : undefined;
  }

  async put(key: string, value: unknown): Promise<void> {
    await this.#store(key, value, false);
  }

  create(key: string, value: unknown): Promise<boolean> {
    return this.#store(key, value, true);
  }

  async delete(key: string): Promise<void> {
    checkStorageKey('key', key);
    await this.#redis.script(DELETE_RECORD, [this.#keys.record(key), this.#keys.recordIndex], [key]);
  }

  async list<T>(prefix: string): Promise<T[]> {
    checkStorageKey('prefix', prefix, true);
    const found: T[] = [];
    // Port keys are ASCII: every key starting with `prefix` sorts from `[prefix` up to `prefix` + 0xff.
    let from: string | Buffer = `[${prefix}`;
    const to = Buffer.concat([Buffer.from(`[${prefix}`), Buffer.from([0xff])]);
    for (;;) {
      const keys = (await this.#redis.send([
        'ZRANGEBYLEX',
        this.#keys.recordIndex,
        from,
        to,
        'LIMIT',
        '0',
        String(PAGE),
      ])) as string[];
      if (keys.length === 0) break;
      const values = (await this.#redis.send(['MGET', ...keys.map((key) => this.#keys.record(key))])) as Array<
        string | null
      >;
      // A record deleted between the two commands is simply not listed.
      for (const json of values) if (json !== null) found.push(JSON.parse(json) as T);
      if (keys.length < PAGE) break;
      from = `(${keys[keys.length - 1]}`;
    }
    return found;
  }

  async #store(key: string, value: unknown, onlyNew: boolean): Promise<boolean> {
    checkStorageKey('key', key);
    const json = recordJson(value);
    const stored = await this.#redis.script(
      PUT_RECORD,
      [this.#keys.record(key), this.#keys.recordIndex],
      [json, key, onlyNew ? '1' : '0'],
    );
    return Number(stored) === 1;
  }
}

/**
 * {@link ResultLogStorage} on a Redis list of entries, a hash of the custom_ids it holds and a hash of counts.
 *
 * @example
 * ```ts
 * await new RedisResultLogs(commands, keys).append('batch_abc', { customId: 'a', ok: true, line }); // true
 * ```
 */
export class RedisResultLogs implements ResultLogStorage {
  readonly #redis: RedisCommands;
  readonly #keys: BatchKeys;

  constructor(redis: RedisCommands, keys: BatchKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async append(log: string, entry: ResultEntry): Promise<boolean> {
    checkStorageKey('log', log);
    checkResultEntry(entry);
    const { customId, ok, line } = entry;
    const json = JSON.stringify({ customId, ok, line });
    const keys = [this.#keys.resultIds(log), this.#keys.resultLines(log), this.#keys.resultCounts(log)];
    return Number(await this.#redis.script(APPEND_RESULT, keys, [customId, ok ? '1' : '0', json])) === 1;
  }

  async *read(log: string): AsyncIterable<ResultEntry> {
    const lines = this.#keys.resultLines(checkStorageKey('log', log));
    for (let start = 0; ; start += PAGE) {
      const page = (await this.#redis.send(['LRANGE', lines, String(start), String(start + PAGE - 1)])) as string[];
      for (const json of page) yield JSON.parse(json) as ResultEntry;
      if (page.length < PAGE) return;
    }
  }

  async counts(log: string): Promise<{ readonly ok: number; readonly failed: number }> {
    const counts = this.#keys.resultCounts(checkStorageKey('log', log));
    const [ok, failed] = (await this.#redis.send(['HMGET', counts, 'ok', 'failed'])) as Array<string | null>;
    return { ok: Number(ok ?? 0), failed: Number(failed ?? 0) };
  }

  async delete(log: string): Promise<void> {
    checkStorageKey('log', log);
    const keys = this.#keys;
    await this.#redis.send(['DEL', keys.resultIds(log), keys.resultLines(log), keys.resultCounts(log)]);
  }
}

/**
 * {@link LeaseStorage} on expiring Redis strings holding the holder: Redis's clock decides when a lease lapses,
 * whatever the processes' clocks say.
 *
 * @example
 * ```ts
 * if (await new RedisLeases(commands, keys).acquire('batch_abc', 'replica-1', 30_000)) run();
 * ```
 */
export class RedisLeases implements LeaseStorage {
  readonly #redis: RedisCommands;
  readonly #keys: BatchKeys;

  constructor(redis: RedisCommands, keys: BatchKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  async acquire(key: string, holder: string, ttlMs: number): Promise<boolean> {
    checkStorageKey('key', key);
    checkLease(holder, ttlMs);
    return Number(await this.#redis.script(ACQUIRE_LEASE, [this.#keys.lease(key)], [holder, String(ttlMs)])) === 1;
  }

  async release(key: string, holder: string): Promise<void> {
    checkStorageKey('key', key);
    checkLease(holder);
    await this.#redis.script(RELEASE_LEASE, [this.#keys.lease(key)], [holder]);
  }
}
