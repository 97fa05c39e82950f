// A test helper (never shipped): the Batch API's storage port in memory, shared by several runners of one test as a
// broker is by several replicas. Leases lapse on the test's clock, and `cut` makes a holder's renewals fail, as a
// replica killed (or cut off from the broker) would.
import type { BatchStorage, ResultEntry } from '@microbatch/transport';

/** The in-memory storage, with the test's handles on it. */
export interface MemoryBatchStorage extends BatchStorage {
  /** From now on, `holder` gets and renews no lease (a dead replica): its leases lapse on the clock. */
  cut(holder: string): void;
  /** Every entry appended to log `log`, duplicates refused or not: what each writer tried. */
  attempts(log: string): readonly ResultEntry[];
  /** How many times `holder` was refused a lease. */
  refused(holder: string): number;
  /** How many reads of record `key` found it. */
  hits(key: string): number;
}

/**
 * A {@link BatchStorage} in memory, `shared: true`, its leases timed by `now`.
 *
 * @example
 * ```ts
 * let clock = 0;
 * const storage = memoryBatchStorage(() => clock);
 * ```
 */
export function memoryBatchStorage(now: () => number): MemoryBatchStorage {
  const blobs = new Map<string, Buffer>();
  const records = new Map<string, string>();
  const logs = new Map<string, ResultEntry[]>();
  const tried = new Map<string, ResultEntry[]>();
  const leases = new Map<string, { holder: string; until: number }>();
  const cut = new Set<string>();
  const refusals = new Map<string, number>();
  const found = new Map<string, number>();
  const refuse = (holder: string): false => {
    refusals.set(holder, (refusals.get(holder) ?? 0) + 1);
    return false;
  };
  return {
    description: 'memory',
    shared: true,
    blobs: {
      async put(key, source, maxBytes) {
        const chunks: Buffer[] = [];
        let bytes = 0;
        for await (const chunk of source) {
          bytes += chunk.length;
          if (bytes <= maxBytes) chunks.push(Buffer.from(chunk));
        }
        if (bytes > maxBytes) return { bytes, tooLarge: true };
        blobs.set(key, Buffer.concat(chunks));
        return { bytes, tooLarge: false };
      },
      async get(key) {
        const blob = blobs.get(key);
        if (blob === undefined) return undefined;
        // In small chunks, so line reading meets lines split across them.
        return (async function* () {
          for (let at = 0; at < blob.length; at += 7) yield blob.subarray(at, at + 7);
        })();
      },
      async delete(key) {
        blobs.delete(key);
      },
    },
    records: {
      get: async <T>(key: string) => {
        const text = records.get(key);
        if (text !== undefined) found.set(key, (found.get(key) ?? 0) + 1);
        return text === undefined ? undefined : (JSON.parse(text) as T);
      },
      async put(key, value) {
        records.set(key, JSON.stringify(value));
      },
      async create(key, value) {
        if (records.has(key)) return false;
        records.set(key, JSON.stringify(value));
        return true;
      },
      async delete(key) {
        records.delete(key);
      },
      list: async <T>(prefix: string) =>
        [...records].filter(([key]) => key.startsWith(prefix)).map(([, text]) => JSON.parse(text) as T),
    },
    results: {
      async append(log, entry) {
        tried.set(log, [...(tried.get(log) ?? []), entry]);
        const entries = logs.get(log) ?? [];
        logs.set(log, entries);
        if (entries.some((existing) => existing.customId === entry.customId)) return false;
        entries.push(entry);
        return true;
      },
      async *read(log) {
        yield* (logs.get(log) ?? []).slice();
      },
      async counts(log) {
        const entries = logs.get(log) ?? [];
        const ok = entries.filter((entry) => entry.ok).length;
        return { ok, failed: entries.length - ok };
      },
      async delete(log) {
        logs.delete(log);
      },
    },
    leases: {
      async acquire(key, holder, ttlMs) {
        if (cut.has(holder)) return refuse(holder);
        const lease = leases.get(key);
        if (lease !== undefined && lease.holder !== holder && now() < lease.until) return refuse(holder);
        leases.set(key, { holder, until: now() + ttlMs });
        return true;
      },
      async release(key, holder) {
        if (leases.get(key)?.holder === holder) leases.delete(key);
      },
    },
    close: async () => undefined,
    cut: (holder) => cut.add(holder),
    attempts: (log) => tried.get(log) ?? [],
    refused: (holder) => refusals.get(holder) ?? 0,
    hits: (key) => found.get(key) ?? 0,
  };
}
