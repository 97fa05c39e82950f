// `openRedisBatchStorage`: the Batch API's storage port (`BatchStorage`) on Redis, so every web replica and worker
// sharing the Redis answers for any batch and runs any batch's lines. The parts: batch-blobs.ts (files),
// batch-records.ts (records, result logs, leases); their keys and scripts: batch-keys.ts.
import type { BatchStorage } from '@microbatch/transport';
import { unavailable, withoutCredentials } from '@microbatch/transport';
import { MAX_FINITE, checkNumber, checkString, definedEntries, fail, isObjectLike } from '@microbatch/core/util';
import { RedisBlobs } from './batch-blobs.js';
import { RedisCommands } from './batch-commands.js';
import { batchKeys } from './batch-keys.js';
import { RedisLeases, RedisRecords, RedisResultLogs } from './batch-records.js';
import { type Connection, closeConnection, openConnection } from './connection.js';

/** Options of {@link openRedisBatchStorage}. */
export interface RedisBatchStorageOptions {
  /** The Redis server, `redis://[user:password@]host:port[/db]` (or `rediss://`). */
  readonly url: string;
  /**
   * The prefix of every key the store uses (its keys are under `<prefix>:batch:`).
   * @default 'microbatch'
   */
  readonly prefix?: string;
  /**
   * How long one Redis command may take before it fails (a blob chunk is one command of 256 KiB).
   * @default 10000
   */
  readonly commandTimeoutMs?: number;
  /**
   * How long opening waits for Redis to answer before it fails with 503 `UNAVAILABLE`.
   * @default 10000
   */
  readonly connectTimeoutMs?: number;
}

export const REDIS_BATCH_STORAGE_DEFAULTS = {
  prefix: 'microbatch',
  commandTimeoutMs: 10_000,
  connectTimeoutMs: 10_000,
} as const;

/**
 * Opens the Batch API's store on Redis: blobs as lists of 256 KiB chunks (renamed into place once complete),
 * records as JSON strings with a sorted-set index, result logs as a list plus a hash of custom_ids (first write
 * wins, in one script), leases as expiring strings. Resolves once Redis answers; the connection then reconnects on
 * its own, and a command while Redis is unreachable fails with 503 `UNAVAILABLE`.
 *
 * @example
 * ```ts
 * const storage = await openRedisBatchStorage({ url: 'redis://127.0.0.1:6379' });
 * await storage.records.put('batch_abc', { id: 'batch_abc', status: 'validating' });
 * await storage.close();
 * ```
 */
export async function openRedisBatchStorage(options: RedisBatchStorageOptions): Promise<BatchStorage> {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const resolved = {
    ...REDIS_BATCH_STORAGE_DEFAULTS,
    ...definedEntries('options', options),
  } as Required<RedisBatchStorageOptions>;
  const url = checkString('url', resolved.url);
  if (!/^rediss?:\/\//.test(url)) fail('url', 'a redis:// or rediss:// URL', url);
  checkString('prefix', resolved.prefix);
  if (/[\s{}]/.test(resolved.prefix)) fail('prefix', 'a prefix without spaces or braces', resolved.prefix);
  checkNumber('commandTimeoutMs', resolved.commandTimeoutMs, 0, MAX_FINITE, true);
  checkNumber('connectTimeoutMs', resolved.connectTimeoutMs, 0, MAX_FINITE, true);
  const description = withoutCredentials(url);
  const connection = openConnection(url, 'microbatch-batch-storage', resolved.commandTimeoutMs);
  if (!(await ready(connection, resolved.connectTimeoutMs))) {
    await closeConnection(connection, true);
    throw unavailable(`Redis at ${description} did not answer within ${resolved.connectTimeoutMs} ms`, 1);
  }
  const commands = new RedisCommands(connection);
  const keys = batchKeys(resolved.prefix);
  return {
    description,
    shared: true,
    blobs: new RedisBlobs(commands, keys),
    records: new RedisRecords(commands, keys),
    results: new RedisResultLogs(commands, keys),
    leases: new RedisLeases(commands, keys),
    close: () => closeConnection(connection),
  };
}

/** Whether `connection` became ready within `timeoutMs`. */
function ready(connection: Connection, timeoutMs: number): Promise<boolean> {
  if (connection.isReady) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      connection.off('ready', onReady);
      resolve(false);
    }, timeoutMs);
    const onReady = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    connection.once('ready', onReady);
  });
}
