// The Batch API's storage port (batch-storage-contract.ts) on the embedded store, `--data-dir`'s: one process owns
// the folder, so both of the suite's "instances" are the one store (as the runners of one process share it). Then
// what is the disk store's own: a log torn by a kill mid-append, and keys that must never become paths.
import { appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDiskBatchStorage } from '../../packages/serving/src/batch-api/disk-storage.js';
import { batchStorageContract } from './batch-storage-contract.js';

batchStorageContract('a data directory', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'microbatch-disk-storage-'));
  const storage = await openDiskBatchStorage(dir);
  return {
    open: async () => storage,
    // A torn upload's part file must be gone.
    leftovers: async () => readdirSync(join(dir, 'blobs')).filter((name) => name.endsWith('.part')).length,
    stop: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

describe('the data directory store, after a kill', () => {
  const dir = mkdtempSync(join(tmpdir(), 'microbatch-disk-torn-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('cuts a torn last log line off when the next process opens the log: that line runs again', async () => {
    const before = await openDiskBatchStorage(dir);
    expect(await before.results.append('batch_torn', { customId: 'a', ok: true, line: '{"n":1}' })).toBe(true);
    expect(await before.results.append('batch_torn', { customId: 'b', ok: false, line: '{"n":2}' })).toBe(true);
    // What a SIGKILL mid-append leaves: part of a third entry, with no newline.
    appendFileSync(join(dir, 'results', 'batch_torn.jsonl'), '{"customId":"c","ok":tr');
    const after = await openDiskBatchStorage(dir);
    expect(await after.results.counts('batch_torn')).toEqual({ ok: 1, failed: 1 });
    const kept = readFileSync(join(dir, 'results', 'batch_torn.jsonl'), 'utf8');
    expect(kept.endsWith('\n')).toBe(true);
    expect(kept.trimEnd().split('\n')).toHaveLength(2);
    expect(await after.results.append('batch_torn', { customId: 'c', ok: true, line: '{"n":3}' })).toBe(true);
    const entries = [];
    for await (const entry of after.results.read('batch_torn')) entries.push(entry.customId);
    expect(entries).toEqual(['a', 'b', 'c']);
  });

  it('refuses a key that could name another path', async () => {
    const storage = await openDiskBatchStorage(dir);
    for (const key of ['../x', 'a/b', '', '.']) {
      await expect(Promise.resolve().then(() => storage.records.get(key))).rejects.toThrow(TypeError);
    }
  });
});
