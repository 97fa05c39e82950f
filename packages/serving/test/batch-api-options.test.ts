// The Batch API's options: exactly one of a local folder and a shared store, and an option that would have no effect
// (a lease on a folder one process owns) refused by name.
import { describe, expect, it } from 'vitest';
import { resolveBatchApiOptions } from '../src/batch-api/batch-api-options.js';
import { memoryBatchStorage } from './memory-batch-storage.js';

describe('resolveBatchApiOptions', () => {
  const storage = memoryBatchStorage(() => 0);

  it('takes a folder or a shared store, with the lease default on a store', () => {
    expect(resolveBatchApiOptions({ dataDir: '/tmp/mb' }).store).toEqual({ dataDir: '/tmp/mb' });
    const shared = resolveBatchApiOptions({ storage, leaseMs: 5_000 });
    expect(shared.store).toEqual({ storage });
    expect(shared.leaseMs).toBe(5_000);
    expect(resolveBatchApiOptions({ storage }).leaseMs).toBe(10_000);
  });

  it('refuses neither, both, a bad store and a lease with no effect, naming them', () => {
    const exactlyOne = 'batchApi needs exactly one of `dataDir` (a local folder) and `storage` (a shared store)';
    expect(() => resolveBatchApiOptions({})).toThrow(new TypeError(exactlyOne));
    expect(() => resolveBatchApiOptions({ dataDir: '/tmp/mb', storage })).toThrow(new TypeError(exactlyOne));
    expect(() => resolveBatchApiOptions({ storage: {} as never })).toThrow(/`batchApi.storage`/);
    expect(() => resolveBatchApiOptions({ dataDir: '/tmp/mb', leaseMs: 1_000 })).toThrow(
      'batchApi.leaseMs has no effect without a shared `storage`',
    );
    expect(() => resolveBatchApiOptions({ storage, leaseMs: 0 })).toThrow(/`batchApi.leaseMs`/);
  });
});
