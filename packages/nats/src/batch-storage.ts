// `openNatsBatchStorage`: the Batch API's storage port (`BatchStorage`) on NATS JetStream, so every web replica and
// worker sharing the NATS answers for any batch and runs any batch's lines. The parts: batch-blobs.ts (Object
// Store), batch-records.ts (records and result logs in KV), batch-leases.ts (leases in KV).
import { StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { MAX_FINITE, checkNumber, checkString, definedEntries, fail, isObjectLike } from '@microbatch/core/util';
import { type BatchStorage, unavailable, withoutCredentials } from '@microbatch/transport';
import { NatsBlobs } from './batch-blobs.js';
import { NatsLeases } from './batch-leases.js';
import { NatsRecords, NatsResultLogs } from './batch-records.js';
import { ORPHAN_IDLE_MS, sweepOrphanChunks } from './batch-sweep.js';
import { guarded } from './batch-unavailable.js';
import { openBroker } from './broker.js';

/** Options of {@link openNatsBatchStorage}. */
export interface NatsBatchStorageOptions {
  /** The NATS server (with JetStream), `nats://[user:password@]host:port` (or `tls://`). */
  readonly url: string;
  /**
   * The start of the store's bucket names (`<prefix>_batch_blobs`, `_records`, `_results`, `_leases`).
   * @default 'microbatch'
   */
  readonly prefix?: string;
  /**
   * How long opening waits for NATS to answer before it fails with 503 `UNAVAILABLE`.
   * @default 10000
   */
  readonly connectTimeoutMs?: number;
}

export const NATS_BATCH_STORAGE_DEFAULTS = { prefix: 'microbatch', connectTimeoutMs: 10_000 } as const;

/**
 * The buckets of a store (file storage: they outlive a NATS restart): an Object Store for blobs and KV buckets for
 * records, result logs and leases, each keeping one value per key.
 *
 * @example
 * ```ts
 * batchBuckets('microbatch').results; // 'microbatch_batch_results' (its stream: 'KV_microbatch_batch_results')
 * ```
 */
export function batchBuckets(prefix: string) {
  const base = `${prefix}_batch`;
  return { blobs: `${base}_blobs`, records: `${base}_records`, results: `${base}_results`, leases: `${base}_leases` };
}

/**
 * Opens the Batch API's store on NATS JetStream: blobs in an Object Store (an object exists once complete), records
 * in KV, result logs in KV (a key per custom_id, created once: the first write wins; read in stream order), leases
 * in KV (compare-and-set by revision). Creates the buckets when missing; resolves once NATS answers. The connection
 * then reconnects on its own (on opening, the chunks of uploads whose writer died and that have been idle for an hour
 * are purged); a call while NATS is unreachable fails with 503 `UNAVAILABLE`.
 *
 * @example
 * ```ts
 * const storage = await openNatsBatchStorage({ url: 'nats://127.0.0.1:4222' });
 * await storage.records.put('batch_abc', { id: 'batch_abc', status: 'validating' });
 * await storage.close();
 * ```
 */
export async function openNatsBatchStorage(options: NatsBatchStorageOptions): Promise<BatchStorage> {
  if (!isObjectLike(options)) fail('options', 'an object', options);
  const resolved = {
    ...NATS_BATCH_STORAGE_DEFAULTS,
    ...definedEntries('options', options),
  } as Required<NatsBatchStorageOptions>;
  const url = checkString('url', resolved.url);
  if (!/^(nats|tls):\/\/[^\s]+$/.test(url)) fail('url', 'a nats:// or tls:// URL', url);
  if (typeof resolved.prefix !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(resolved.prefix))
    fail('prefix', '1 to 64 characters of [A-Za-z0-9_-]', resolved.prefix);
  checkNumber('connectTimeoutMs', resolved.connectTimeoutMs, 0, MAX_FINITE, true);
  const description = withoutCredentials(url);
  let connected: (connection: NatsConnection) => void = () => undefined;
  const up = new Promise<NatsConnection>((resolve) => (connected = resolve));
  const broker = openBroker(url, 'microbatch:batch-storage', {
    onUp: (connection) => connected(connection),
    onDown: () => undefined,
  });
  let timer: NodeJS.Timeout | undefined;
  const connection = await Promise.race([
    up,
    new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), resolved.connectTimeoutMs))),
  ]);
  clearTimeout(timer);
  if (connection === undefined) {
    await broker.close();
    throw unavailable(`NATS at ${description} did not answer within ${resolved.connectTimeoutMs} ms`, 1);
  }
  try {
    const js = jetstream(connection);
    const manager = await jetstreamManager(connection);
    const buckets = batchBuckets(resolved.prefix);
    const kvm = new Kvm(js);
    const kvOptions = { history: 1, storage: StorageType.File };
    const [blobs, records, results, leases] = await Promise.all([
      new Objm(js).create(buckets.blobs, { storage: StorageType.File }),
      kvm.create(buckets.records, kvOptions),
      kvm.create(buckets.results, kvOptions),
      kvm.create(buckets.leases, kvOptions),
    ]);
    // Uploads cut short by a process that died are dropped once idle long enough (best effort: the store works without).
    await sweepOrphanChunks(manager, buckets.blobs, new Date(Date.now() - ORPHAN_IDLE_MS)).catch(() => 0);
    const blobStorage = new NatsBlobs(blobs, js, manager, buckets.blobs);
    return {
      description,
      shared: true,
      blobs: guarded(blobStorage, ['put', 'get', 'delete']),
      records: guarded(new NatsRecords(records), ['get', 'put', 'create', 'delete', 'list']),
      results: guarded(new NatsResultLogs(results, js, manager, buckets.results, blobStorage), [
        'append',
        'read',
        'counts',
        'delete',
      ]),
      leases: guarded(new NatsLeases(leases), ['acquire', 'release']),
      close: () => broker.close(),
    };
  } catch (error) {
    await broker.close();
    throw error;
  }
}
