// The Batch API's storage port (batch-storage-contract.ts) on each broker's own storage: Redis keys, and NATS
// JetStream KV and Object Store, each on a server this test starts on a free port.
import { openRedisBatchStorage } from '@microbatch/redis';
import { startRedisServer } from '@microbatch/test-kit';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { batchStorageContract } from './batch-storage-contract.js';

batchStorageContract('Redis', async () => {
  const redis = await startRedisServer();
  return {
    open: () => openRedisBatchStorage({ url: redis.url }),
    // A torn upload's key (`upload:*`) must be gone, not just left to expire.
    leftovers: async () => {
      const client = createClient({ url: redis.url, RESP: 2 });
      client.on('error', () => undefined);
      await client.connect();
      try {
        return (await client.keys('microbatch:batch:upload:*')).length;
      } finally {
        client.destroy();
      }
    },
    stop: () => redis.stop(),
  };
});

describe('openRedisBatchStorage', () => {
  it('refuses bad options by name', async () => {
    await expect(openRedisBatchStorage({ url: 'http://x' })).rejects.toThrow(/`url`/);
    await expect(openRedisBatchStorage({ url: 'redis://x', prefix: 'a b' })).rejects.toThrow(/`prefix`/);
    await expect(openRedisBatchStorage({ url: 'redis://x', connectTimeoutMs: 0 })).rejects.toThrow(
      /`connectTimeoutMs`/,
    );
  });

  it('fails with 503 UNAVAILABLE when Redis does not answer, naming it without its password', async () => {
    const opening = openRedisBatchStorage({ url: 'redis://user:secret@127.0.0.1:1', connectTimeoutMs: 200 });
    await expect(opening).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await expect(opening).rejects.toThrow('redis://127.0.0.1:1');
    await expect(opening).rejects.not.toThrow('secret');
  });
});
