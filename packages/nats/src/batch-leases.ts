// The Batch API's leases in JetStream KV: one key per lease holding its holder and ttl, changed only by revision
// (compare-and-set), so of two processes that race for a lease one wins.
//
// When a lease lapses is decided without comparing clocks: a bucket TTL is one age for every key (each acquire names
// its own ttl; per-message TTLs need NATS 2.11), and an expiry time written by one machine and read against another's
// clock is only as right as the two clocks agree. Instead a process that finds another's lease notes its revision on
// its own monotonic clock, and takes the lease once that revision has stayed the same for the lease's ttl: the holder
// did not renew it in time. The cost: a newcomer waits one ttl from its first look, even for a lease that lapsed long
// before (a batch whose runner died is taken up at most one ttl later than with synchronized clocks).
import { performance } from 'node:perf_hooks';
import type { KV } from '@nats-io/kv';
import { type LeaseStorage, checkLease, checkStorageKey } from '@microbatch/transport';
import { isConflict, liveValue } from './batch-records.js';

/** Leases of other holders an instance watches at once (the oldest is forgotten past it: seen again, it waits anew). */
const WATCHED = 4_096;

interface LeaseValue {
  readonly holder: string;
  readonly ttlMs: number;
}

/**
 * {@link LeaseStorage} on a KV bucket.
 *
 * @example
 * ```ts
 * if (await new NatsLeases(kv).acquire('batch_abc', 'replica-1', 30_000)) run();
 * ```
 */
export class NatsLeases implements LeaseStorage {
  readonly #kv: KV;
  readonly #now: () => number;
  /** Other holders' leases seen: the revision, and when (this process's monotonic clock) it was first seen. */
  readonly #seen = new Map<string, { revision: number; at: number }>();

  constructor(kv: KV, now: () => number = () => performance.now()) {
    this.#kv = kv;
    this.#now = now;
  }

  async acquire(key: string, holder: string, ttlMs: number): Promise<boolean> {
    checkStorageKey('key', key);
    checkLease(holder, ttlMs);
    const value = JSON.stringify({ holder, ttlMs } satisfies LeaseValue);
    const entry = liveValue(await this.#kv.get(key));
    if (entry === undefined) return this.#write(key, () => this.#kv.create(key, value));
    const current = entry.json<LeaseValue>();
    if (current.holder !== holder) {
      const seen = this.#seen.get(key);
      const now = this.#now();
      if (seen === undefined || seen.revision !== entry.revision) {
        this.#seen.delete(key);
        this.#seen.set(key, { revision: entry.revision, at: now });
        if (this.#seen.size > WATCHED) this.#seen.delete(this.#seen.keys().next().value as string);
        return false;
      }
      if (now - seen.at < current.ttlMs) return false;
    }
    return this.#write(key, () => this.#kv.update(key, value, entry.revision));
  }

  async release(key: string, holder: string): Promise<void> {
    checkStorageKey('key', key);
    checkLease(holder);
    const entry = liveValue(await this.#kv.get(key));
    if (entry === undefined || entry.json<LeaseValue>().holder !== holder) return;
    await this.#write(key, () => this.#kv.delete(key, { previousSeq: entry.revision }));
  }

  /** Runs a compare-and-set write: whether it won. */
  async #write(key: string, write: () => Promise<unknown>): Promise<boolean> {
    try {
      await write();
      this.#seen.delete(key);
      return true;
    } catch (error) {
      if (isConflict(error)) return false;
      throw error;
    }
  }
}
