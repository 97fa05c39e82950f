// The Batch API's storage port (batch-storage-contract.ts) on the embedded store, `--data-dir`'s: one process owns
// the folder, so both of the suite's "instances" are the one store (as the runners of one process share it).
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
