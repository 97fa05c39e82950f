// The Batch API's runners sharing one store, as replicas share a broker: a batch runs under its runner's lease; a
// runner that dies (its renewals refused) stops feeding and another takes the batch up once the lease lapses on the
// clock, with each custom_id exactly once across the files; a cancel asked on a replica that does not run the batch
// reaches the one that does; a batch whose window passed while its runner was dead ends `expired`. The storage is
// in memory, leases lapse on an injected clock, and every step waits for counted work, never for a duration.
import { Readable } from 'node:stream';
import type { BatcherBase } from '@microbatch/core';
import { pollUntil, waitFor } from '@microbatch/test-kit';
import { describe, expect, it } from 'vitest';
import { BatchRunner } from '../src/batch-api/batch-runner.js';
import { BatchStore, type StoredBatch } from '../src/batch-api/batch-store.js';
import { FileStore } from '../src/batch-api/file-store.js';
import { SpareCapacity } from '../src/batch-api/spare-capacity.js';
import type { LineEndpoint } from '../src/batch-api/batch-lines.js';
import type { ResultLine } from '../src/batch-api/batch-results.js';
import { type MemoryBatchStorage, memoryBatchStorage } from './memory-batch-storage.js';

/** Real milliseconds between renewals are a third of this; a lease lapses only when the test moves the clock. */
const LEASE_MS = 30;
const WINDOW_MS = 60_000;
const LINES = 10;
const ids = Array.from({ length: LINES }, (_, index) => `c${index}`);

/** A line endpoint that holds the lines `holds` names until the test releases them, and answers the others at once. */
function endpointOf(tag: string, holds: (customId: string) => boolean) {
  const calls: string[] = [];
  const held = new Map<string, () => void>();
  const endpoint: LineEndpoint = async (body) => {
    const id = String((body as { prompt?: unknown }).prompt);
    calls.push(id);
    if (holds(id)) await new Promise<void>((resolve) => held.set(id, resolve));
    return { status: 200, body: { by: tag, prompt: id } };
  };
  const release = (id: string): void => {
    const resolve = held.get(id);
    if (resolve === undefined) throw new Error(`${tag} holds no ${id}`);
    held.delete(id);
    resolve();
  };
  return { endpoint, calls, held, release };
}

/** Batchers with room always, no interactive request: the feeding is bounded by `maxInFlight` only. */
const idle = {
  queueLength: 0,
  inFlightBatches: 0,
  maxConcurrentBatches: 100,
  // No batch ever starts: the gate's listener is never called (and unsubscribing does nothing).
  on: () => () => undefined,
} as unknown as BatcherBase;

async function setUp() {
  const clock = { now: 1_000_000 };
  const now = (): number => clock.now;
  const storage = memoryBatchStorage(now);
  const files = new FileStore(storage, now);
  const batches = new BatchStore(storage.records, now);
  const text = ids
    .map((id) => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/completions', body: { prompt: id } }))
    .join('\n');
  const pending = await files.receive(Readable.from([Buffer.from(text)]), 1_000_000);
  await files.commit(pending, { filename: 'in.jsonl', purpose: 'batch', owner: null });
  const created = await batches.create({
    endpoint: '/v1/completions',
    inputFileId: pending.id,
    metadata: null,
    owner: null,
    windowMs: WINDOW_MS,
  });
  const errors: unknown[] = [];
  const runner = (holder: string, endpoint: LineEndpoint): BatchRunner =>
    new BatchRunner({
      files,
      batches,
      storage,
      holder,
      leaseMs: LEASE_MS,
      endpoints: { '/v1/completions': endpoint },
      bounds: { maxLines: 100, maxLineBytes: 10_000 },
      gate: new SpareCapacity({ batchers: [idle], batchItemsInFlight: () => 0, maxInFlight: 2 }),
      onError: (error) => errors.push(error),
    });
  const id = created.batch.id;
  const batch = async (): Promise<StoredBatch> => (await batches.get(id)) as StoredBatch;
  const ended = async (status: string): Promise<StoredBatch> => {
    const { value, ok } = await pollUntil(batch, (stored) => stored.batch.status === status, 20_000, 5);
    expect(ok, `batch ${value.batch.status}, waiting for ${status}`).toBe(true);
    return value;
  };
  const lines = async (fileId: string | null): Promise<ResultLine[]> => {
    if (fileId === null) return [];
    const chunks: Buffer[] = [];
    for await (const chunk of (await files.openContent(fileId)) ?? []) chunks.push(Buffer.from(chunk));
    return Buffer.concat(chunks)
      .toString('utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as ResultLine);
  };
  return { clock, storage, runner, id, batch, ended, lines, errors };
}

/** Waits until `holder`'s lease renewals have been refused (it has seen it lost the lease). */
const lostBy = (storage: MemoryBatchStorage, holder: string) =>
  waitFor(`${holder} to be refused its lease`, () => storage.refused(holder) > 0);

/** Runner A started on batch `id`, with c0 answered and c2 taken up in its place (c1 still held). */
async function startPastC0(
  runner: (holder: string, endpoint: LineEndpoint) => BatchRunner,
  id: string,
): Promise<{ a: ReturnType<typeof endpointOf>; runnerA: BatchRunner }> {
  const a = endpointOf('A', () => true);
  const runnerA = runner('A', a.endpoint);
  runnerA.start(id);
  await waitFor('A to run 2 lines', () => a.calls.length === 2);
  a.release('c0');
  await waitFor('A to run c2', () => a.calls.length === 3);
  return { a, runnerA };
}

describe('Batch API runners on a shared store', () => {
  it('a dead runner’s batch is taken up once its lease lapses: each custom_id exactly once, the first result kept', async () => {
    const { clock, storage, runner, id, ended, lines, errors } = await setUp();
    const { a, runnerA } = await startPastC0(runner, id);
    a.release('c1');
    await waitFor('A to run c3', () => a.calls.length === 4);
    // A dies with c2 and c3 running: its renewals fail, and the clock passes its lease.
    storage.cut('A');
    await lostBy(storage, 'A');
    clock.now += LEASE_MS + 1;
    // B holds c2 and c3 until A's answers for them are written: A's come first and are the ones kept.
    const b = endpointOf('B', (customId) => customId === 'c2' || customId === 'c3');
    const runnerB = runner('B', b.endpoint);
    await runnerB.resume();
    await waitFor('B to run c2 and c3', () => b.held.size === 2);
    a.release('c2');
    a.release('c3');
    await waitFor('A to write c2 and c3', () => storage.attempts(id).length === 4);
    b.release('c2');
    b.release('c3');
    const done = await ended('completed');

    expect(done.batch.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
    const output = await lines(done.batch.output_file_id);
    expect(output.map((line) => line.custom_id).sort()).toEqual([...ids].sort());
    expect(done.batch.error_file_id).toBeNull();
    const byOf = (customId: string): unknown =>
      (output.find((line) => line.custom_id === customId)?.response?.body as { by?: unknown } | undefined)?.by;
    expect(['c0', 'c1', 'c2', 'c3'].map(byOf)).toEqual(['A', 'A', 'A', 'A']);
    expect(['c4', 'c5', 'c9'].map(byOf)).toEqual(['B', 'B', 'B']);
    // A fed nothing once it had lost the lease; B ran every line not done when it took over, c2 and c3 twice over.
    expect(a.calls).toEqual(['c0', 'c1', 'c2', 'c3']);
    expect([...b.calls].sort()).toEqual(ids.slice(2).sort());
    expect(storage.attempts(id).filter((entry) => entry.customId === 'c2').length).toBe(2);
    await runnerA.close();
    await runnerB.close();
    expect(errors).toEqual([]);
  });

  it('a cancel asked on a replica that does not run the batch stops the one that does', async () => {
    const { storage, runner, id, batch, ended, lines, errors } = await setUp();
    const a = endpointOf('A', () => true);
    const runnerA = runner('A', a.endpoint);
    runnerA.start(id);
    await waitFor('A to run 2 lines', () => a.calls.length === 2);
    const b = endpointOf('B', () => true);
    const runnerB = runner('B', b.endpoint);
    const answered = await runnerB.cancel(await batch());
    expect(answered.batch.status).toBe('cancelling');
    // A reads the cancel mark at its next renewal; then it feeds no more lines.
    await waitFor('A to read the cancel mark', () => storage.hits(`cancel_${id}`) > 0);
    a.release('c0');
    a.release('c1');
    const done = await ended('cancelled');

    expect(done.batch.request_counts).toEqual({ total: LINES, completed: 2, failed: 0 });
    expect((await lines(done.batch.output_file_id)).map((line) => line.custom_id).sort()).toEqual(['c0', 'c1']);
    expect(a.calls).toEqual(['c0', 'c1']);
    expect(b.calls).toEqual([]);
    await runnerA.close();
    await runnerB.close();
    expect(errors).toEqual([]);
  });

  it('a batch whose window passed while its runner was dead ends expired, the lines not run as batch_expired', async () => {
    const { clock, storage, runner, id, batch, ended, lines, errors } = await setUp();
    const { a, runnerA } = await startPastC0(runner, id);
    storage.cut('A');
    await lostBy(storage, 'A');
    clock.now += WINDOW_MS + LEASE_MS;
    const b = endpointOf('B', () => true);
    const runnerB = runner('B', b.endpoint);
    await runnerB.resume();
    const done = await ended('expired');

    expect(done.batch.request_counts).toEqual({ total: LINES, completed: 1, failed: LINES - 1 });
    expect((await lines(done.batch.output_file_id)).map((line) => line.custom_id)).toEqual(['c0']);
    const expired = await lines(done.batch.error_file_id);
    expect(expired.map((line) => line.custom_id).sort()).toEqual(ids.slice(1).sort());
    expect(new Set(expired.map((line) => line.error?.code))).toEqual(new Set(['batch_expired']));
    expect(b.calls).toEqual([]);
    // A's lines still running when it died finish late: the ended batch is left as it is.
    a.release('c1');
    a.release('c2');
    await runnerA.close();
    expect((await batch()).batch).toEqual(done.batch);
    await runnerB.close();
    expect(errors).toEqual([]);
  });
});
