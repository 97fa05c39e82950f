// The contract of the Batch API's storage port (`BatchStorage`, packages/transport/src/batch-storage-port.ts), as
// one suite any store runs: batch-storage.test.ts runs it on Redis and NATS; the embedded store (a data directory)
// can be added as one more call. Work is counted, never timed: a lease's lapse is waited for by polling, bounded
// by attempts.
import { randomBytes, randomUUID } from 'node:crypto';
import type { BatchStorage, ResultEntry } from '@microbatch/transport';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** What the suite runs on: a backend (a broker the driver started, a directory) and stores opened on it. */
export interface StorageBackend {
  /** Opens a store on the backend; each call another instance on the same data (as another process would). */
  open(): Promise<BatchStorage>;
  /** Partial uploads the store left behind outside the port's view (temporary keys, orphan chunks), if it can tell. */
  leftovers?(): Promise<number>;
  /** Stops the backend (the suite closes the stores it opened first). */
  stop(): Promise<void>;
}

/** A source of `total` bytes of `bytes`, in pieces of `piece` bytes; `pulled()` says how many bytes were read. */
function sourceOf(bytes: Uint8Array, piece: number, failAfter?: number) {
  let pulled = 0;
  async function* read(): AsyncGenerator<Uint8Array> {
    for (let at = 0; at < bytes.length; at += piece) {
      if (failAfter !== undefined && at >= failAfter) throw new Error('the client went away');
      const chunk = bytes.subarray(at, Math.min(at + piece, bytes.length));
      pulled += chunk.length;
      yield chunk;
    }
  }
  return { source: read(), pulled: () => pulled };
}

async function readAll(stream: AsyncIterable<Uint8Array> | undefined): Promise<Buffer | undefined> {
  if (stream === undefined) return undefined;
  const parts: Uint8Array[] = [];
  for await (const part of stream) parts.push(part);
  return Buffer.concat(parts);
}

async function entriesOf(log: AsyncIterable<ResultEntry>): Promise<ResultEntry[]> {
  const entries: ResultEntry[] = [];
  for await (const entry of log) entries.push(entry);
  return entries;
}

/** A fresh port key per test, so tests on one backend never see each other's data. */
const fresh = (what: string): string => `${what}-${randomUUID().slice(0, 8)}`;

/**
 * Defines the storage contract's tests for one store.
 *
 * @example
 * ```ts
 * batchStorageContract('redis', async () => {
 *   const redis = await startRedisServer();
 *   return { open: () => openRedisBatchStorage({ url: redis.url }), stop: () => redis.stop() };
 * });
 * ```
 */
export function batchStorageContract(name: string, open: () => Promise<StorageBackend>): void {
  describe(`the Batch API's storage port on ${name}`, () => {
    let backend: StorageBackend;
    let a: BatchStorage;
    let b: BatchStorage;

    beforeAll(async () => {
      backend = await open();
      [a, b] = await Promise.all([backend.open(), backend.open()]);
    });
    afterAll(async () => {
      await Promise.all([a?.close(), b?.close()]);
      await backend?.stop();
    });

    describe('blobs', () => {
      it('round-trips a multi-chunk blob (1 MiB and some, in odd pieces), readable from another instance', async () => {
        const bytes = randomBytes(1024 * 1024 + 12_345);
        const key = fresh('file');
        const { source } = sourceOf(bytes, 10_007);
        expect(await a.blobs.put(key, source, 2 * 1024 * 1024)).toEqual({ bytes: bytes.length, tooLarge: false });
        expect((await readAll(await b.blobs.get(key)))?.equals(bytes)).toBe(true);
        expect((await readAll(await a.blobs.get(key)))?.equals(bytes)).toBe(true);
      });

      it('stores an empty blob (it exists, with no bytes) and a blob of exactly maxBytes', async () => {
        const empty = fresh('empty');
        expect(await a.blobs.put(empty, sourceOf(new Uint8Array(0), 1).source, 0)).toEqual({
          bytes: 0,
          tooLarge: false,
        });
        expect((await readAll(await b.blobs.get(empty)))?.length).toBe(0);
        const exact = fresh('exact');
        const bytes = randomBytes(300_000);
        expect(await a.blobs.put(exact, sourceOf(bytes, 65_536).source, bytes.length)).toEqual({
          bytes: bytes.length,
          tooLarge: false,
        });
        expect((await readAll(await b.blobs.get(exact)))?.equals(bytes)).toBe(true);
      });

      it('past maxBytes keeps nothing, still drains the source and says tooLarge', async () => {
        const key = fresh('big');
        const bytes = randomBytes(700_000);
        const { source, pulled } = sourceOf(bytes, 50_000);
        expect(await a.blobs.put(key, source, 300_000)).toEqual({ bytes: bytes.length, tooLarge: true });
        expect(pulled()).toBe(bytes.length);
        expect(await a.blobs.get(key)).toBeUndefined();
        expect(await b.blobs.get(key)).toBeUndefined();
        if (backend.leftovers !== undefined) expect(await backend.leftovers()).toBe(0);
      });

      it('a source that fails rejects with its error and leaves nothing', async () => {
        const key = fresh('torn');
        await expect(a.blobs.put(key, sourceOf(randomBytes(600_000), 40_000, 400_000).source, 1e9)).rejects.toThrow(
          'the client went away',
        );
        expect(await b.blobs.get(key)).toBeUndefined();
        if (backend.leftovers !== undefined) expect(await backend.leftovers()).toBe(0);
      });

      it('get of a missing blob is undefined; delete removes a blob and ignores a missing one', async () => {
        expect(await a.blobs.get(fresh('missing'))).toBeUndefined();
        await a.blobs.delete(fresh('missing'));
        const key = fresh('gone');
        await a.blobs.put(key, sourceOf(randomBytes(1_000), 100).source, 10_000);
        await b.blobs.delete(key);
        expect(await a.blobs.get(key)).toBeUndefined();
      });
    });

    describe('records', () => {
      it('gets, puts (replacing whole) and deletes', async () => {
        const key = fresh('batch');
        expect(await a.records.get(key)).toBeUndefined();
        await a.records.put(key, { status: 'validating', counts: [1, 2] });
        expect(await b.records.get(key)).toEqual({ status: 'validating', counts: [1, 2] });
        await b.records.put(key, { status: 'in_progress' });
        expect(await a.records.get(key)).toEqual({ status: 'in_progress' });
        await a.records.delete(key);
        expect(await b.records.get(key)).toBeUndefined();
        await a.records.delete(key);
      });

      it('create: of two racing creators (two instances) exactly one wins, and its record is kept', async () => {
        for (let round = 0; round < 10; round += 1) {
          const key = fresh('race');
          const won = await Promise.all([a.records.create(key, { by: 'a' }), b.records.create(key, { by: 'b' })]);
          expect(won.filter(Boolean)).toHaveLength(1);
          expect(await a.records.get(key)).toEqual({ by: won[0] ? 'a' : 'b' });
          expect(await b.records.create(key, { by: 'late' })).toBe(false);
        }
      });

      it('lists every record under a prefix, and only those (past one page of 256)', async () => {
        const prefix = fresh('list');
        const keys = Array.from({ length: 300 }, (_, k) => `${prefix}_${String(k).padStart(3, '0')}`);
        for (let at = 0; at < keys.length; at += 50)
          await Promise.all(keys.slice(at, at + 50).map((key) => a.records.put(key, { key })));
        await a.records.put(`${prefix}x`, { key: 'sibling' });
        await a.records.put(`other-${prefix}`, { key: 'other' });
        await a.records.delete(keys[7] as string);
        const listed = await b.records.list<{ key: string }>(`${prefix}_`);
        expect(listed.map((record) => record.key).sort()).toEqual(keys.filter((_, k) => k !== 7));
        expect(await b.records.list(fresh('none'))).toEqual([]);
        const all = await a.records.list<{ key: string }>('');
        expect(all.filter((record) => record.key === 'sibling' || record.key === 'other')).toHaveLength(2);
      });
    });

    describe('result logs', () => {
      it('keeps the first entry per custom_id under concurrent appends from two instances (200 over 50 ids)', async () => {
        const log = fresh('batch');
        const appends = Array.from({ length: 200 }, (_, k) => {
          const id = `req-${k % 50}`;
          const store = k % 2 === 0 ? a : b;
          return store.results.append(log, { customId: id, ok: (k % 50) % 3 !== 0, line: `{"n":${k}}` });
        });
        const appended = await Promise.all(appends);
        expect(appended.filter(Boolean)).toHaveLength(50);
        const entries = await entriesOf(b.results.read(log));
        expect(entries).toHaveLength(50);
        expect(new Set(entries.map((entry) => entry.customId)).size).toBe(50);
        for (const entry of entries) {
          const n = (JSON.parse(entry.line) as { n: number }).n;
          expect(`req-${n % 50}`).toBe(entry.customId);
          expect(entry.ok).toBe((n % 50) % 3 !== 0);
        }
        const failed = Array.from({ length: 50 }, (_, k) => k).filter((k) => k % 3 === 0).length;
        expect(await a.results.counts(log)).toEqual({ ok: 50 - failed, failed });
        // Counts follow later appends, from either instance.
        expect(await b.results.append(log, { customId: 'late', ok: false, line: '{}' })).toBe(true);
        expect(await a.results.counts(log)).toEqual({ ok: 50 - failed, failed: failed + 1 });
        expect(await b.results.counts(log)).toEqual({ ok: 50 - failed, failed: failed + 1 });
      });

      it('reads entries in the order they were appended, with their lines as written', async () => {
        const log = fresh('order');
        const ids = Array.from({ length: 40 }, (_, k) => `z-${(k * 7) % 40} \u00e9/.*>${'x'.repeat(k * 20)}`);
        for (const [k, customId] of ids.entries())
          expect(
            await (k % 2 === 0 ? a : b).results.append(log, { customId, ok: k % 4 !== 1, line: `{"k":${k}}` }),
          ).toBe(true);
        expect(await a.results.append(log, { customId: ids[3] as string, ok: true, line: 'again' })).toBe(false);
        expect(await entriesOf(a.results.read(log))).toEqual(
          ids.map((customId, k) => ({ customId, ok: k % 4 !== 1, line: `{"k":${k}}` })),
        );
        expect(await entriesOf(a.results.read(fresh('empty')))).toEqual([]);
        expect(await a.results.counts(fresh('empty'))).toEqual({ ok: 0, failed: 0 });
      });

      it('keeps a line of 3 MiB (past a broker message bound) whole, first write winning as for any line', async () => {
        const log = fresh('large');
        const line = JSON.stringify({ data: 'é'.repeat(1_600_000) });
        expect(await a.results.append(log, { customId: 'big', ok: true, line })).toBe(true);
        expect(await b.results.append(log, { customId: 'big', ok: false, line: `${line} ` })).toBe(false);
        expect(await a.results.append(log, { customId: 'small', ok: false, line: '{}' })).toBe(true);
        expect(await entriesOf(b.results.read(log))).toEqual([
          { customId: 'big', ok: true, line },
          { customId: 'small', ok: false, line: '{}' },
        ]);
        expect(await b.results.counts(log)).toEqual({ ok: 1, failed: 1 });
        await a.results.delete(log);
        expect(await entriesOf(b.results.read(log))).toEqual([]);
      });

      it('delete removes the log (entries, counts and custom_ids)', async () => {
        const log = fresh('delete');
        await a.results.append(log, { customId: 'x', ok: true, line: '1' });
        await a.results.append(log, { customId: 'y', ok: false, line: '2' });
        expect(await a.results.counts(log)).toEqual({ ok: 1, failed: 1 });
        await b.results.delete(log);
        expect(await entriesOf(a.results.read(log))).toEqual([]);
        expect(await a.results.counts(log)).toEqual({ ok: 0, failed: 0 });
        expect(await a.results.append(log, { customId: 'x', ok: false, line: '3' })).toBe(true);
        expect(await entriesOf(b.results.read(log))).toEqual([{ customId: 'x', ok: false, line: '3' }]);
        expect(await a.results.counts(log)).toEqual({ ok: 0, failed: 1 });
      });
    });

    describe('leases', () => {
      it('one holder at a time: renewed by its holder, refused to another, free again once released', async () => {
        const key = fresh('lease');
        expect(await a.leases.acquire(key, 'one', 60_000)).toBe(true);
        expect(await b.leases.acquire(key, 'two', 60_000)).toBe(false);
        expect(await b.leases.acquire(key, 'one', 60_000)).toBe(true);
        await b.leases.release(key, 'two');
        expect(await a.leases.acquire(key, 'two', 60_000)).toBe(false);
        await b.leases.release(key, 'one');
        expect(await a.leases.acquire(key, 'two', 60_000)).toBe(true);
        expect(await b.leases.acquire(key, 'one', 60_000)).toBe(false);
        await a.leases.release(key, 'two');
        await a.leases.release(fresh('never'), 'one');
      });

      it('of two racing acquirers exactly one gets a free lease', async () => {
        for (let round = 0; round < 10; round += 1) {
          const key = fresh('race');
          const got = await Promise.all([a.leases.acquire(key, 'one', 60_000), b.leases.acquire(key, 'two', 60_000)]);
          expect(got.filter(Boolean)).toHaveLength(1);
        }
      });

      it('a lease not renewed within its ttl lapses and another holder takes it', async () => {
        const key = fresh('lapse');
        expect(await a.leases.acquire(key, 'dead', 300)).toBe(true);
        let taken = false;
        for (let attempt = 0; attempt < 600 && !taken; attempt += 1) {
          taken = await b.leases.acquire(key, 'next', 60_000);
          if (!taken) await new Promise((resolve) => setTimeout(resolve, 25));
        }
        expect(taken).toBe(true);
        expect(await a.leases.acquire(key, 'dead', 300)).toBe(false);
      });
    });
  });
}
