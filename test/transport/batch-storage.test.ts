// The Batch API's storage port (batch-storage-contract.ts) on each broker's own storage: Redis keys, and NATS
// JetStream KV and Object Store, each on a server this test starts on a free port.
import { Readable } from 'node:stream';
import { batchBuckets, openNatsBatchStorage } from '@microbatch/nats';
import { openRedisBatchStorage } from '@microbatch/redis';
import { startNatsServer, startRedisServer } from '@microbatch/test-kit';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { sweepOrphanChunks } from '../../packages/nats/src/batch-sweep.js';
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

batchStorageContract('NATS', async () => {
  const nats = await startNatsServer();
  const { blobs } = batchBuckets('microbatch');
  return {
    open: () => openNatsBatchStorage({ url: nats.url }),
    // Chunks no object owns: the blob stream's messages less each live object's chunks and the metadata messages.
    leftovers: async () => {
      const connection = await connect({ servers: nats.url.replace('nats://', '') });
      try {
        const manager = await jetstreamManager(connection);
        const stream = `OBJ_${blobs}`;
        const { state } = await manager.streams.info(stream, { subjects_filter: `$O.${blobs}.M.>` });
        const metadata = Object.keys(state.subjects ?? {});
        let owned = 0;
        for (const subject of metadata) {
          const info = (await manager.streams.getMessage(stream, { last_by_subj: subject }))?.json<{
            chunks: number;
            deleted?: boolean;
          }>();
          owned += info === undefined || info.deleted === true ? 0 : info.chunks;
        }
        return state.messages - metadata.length - owned;
      } finally {
        await connection.close();
      }
    },
    stop: () => nats.stop(),
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

  it('an upload that expired while its writer stalled fails, rather than storing a blob without its start', async () => {
    const redis = await startRedisServer();
    const storage = await openRedisBatchStorage({ url: redis.url });
    const client = createClient({ url: redis.url, RESP: 2 });
    client.on('error', () => undefined);
    await client.connect();
    try {
      async function* stalling(): AsyncGenerator<Uint8Array> {
        yield new Uint8Array(300 * 1024);
        // What Redis does to an upload left alone past its ttl.
        for (const key of await client.keys('microbatch:batch:upload:*')) await client.del(key);
        yield new Uint8Array(300 * 1024);
      }
      await expect(storage.blobs.put('file-stalled', stalling(), 1e9)).rejects.toThrow(/expired/);
      expect(await storage.blobs.get('file-stalled')).toBeUndefined();
      expect(await client.keys('microbatch:batch:*')).toEqual([]);
    } finally {
      client.destroy();
      await storage.close();
      await redis.stop();
    }
  });

  it('answers 503 UNAVAILABLE while Redis is gone', async () => {
    const redis = await startRedisServer();
    const storage = await openRedisBatchStorage({ url: redis.url });
    try {
      await storage.records.put('batch_x', { status: 'validating' });
      await redis.stop();
      await expect(storage.records.get('batch_x')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    } finally {
      await storage.close();
    }
  });

  it('fails with 503 UNAVAILABLE when Redis does not answer, naming it without its password', async () => {
    const opening = openRedisBatchStorage({ url: 'redis://user:secret@127.0.0.1:1', connectTimeoutMs: 200 });
    await expect(opening).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await expect(opening).rejects.toThrow('redis://127.0.0.1:1');
    await expect(opening).rejects.not.toThrow('secret');
  });
});

describe('openNatsBatchStorage', () => {
  it('sweeps the chunks of uploads whose writer died once idle, and only those', async () => {
    const nats = await startNatsServer();
    const storage = await openNatsBatchStorage({ url: nats.url });
    const connection = await connect({ servers: nats.url.replace('nats://', '') });
    try {
      const { blobs } = batchBuckets('microbatch');
      const bytes = new Uint8Array(300 * 1024).fill(7);
      await storage.blobs.put('file-kept', Readable.from([bytes]), 1e9);
      // What a writer killed mid-put leaves: chunks no object's metadata names.
      const js = jetstream(connection);
      for (let k = 0; k < 3; k += 1) await js.publish(`$O.${blobs}.C.deadupload`, new Uint8Array(1024));
      const manager = await jetstreamManager(connection);
      const now = new Date(Date.now() + 60_000);
      expect(await sweepOrphanChunks(manager, blobs, new Date(0))).toBe(0);
      expect(await sweepOrphanChunks(manager, blobs, now)).toBe(1);
      expect(await sweepOrphanChunks(manager, blobs, now)).toBe(0);
      const kept = [];
      for await (const chunk of (await storage.blobs.get('file-kept')) ?? []) kept.push(chunk);
      expect(Buffer.concat(kept).equals(Buffer.from(bytes))).toBe(true);
    } finally {
      await connection.close();
      await storage.close();
      await nats.stop();
    }
  });

  // A request waits for its JetStream timeout (5 s) before it fails, well within the suite's hang guard.
  it('answers 503 UNAVAILABLE while NATS is gone', async () => {
    const nats = await startNatsServer();
    const storage = await openNatsBatchStorage({ url: nats.url });
    try {
      await storage.records.put('batch_x', { status: 'validating' });
      await nats.stop();
      await expect(storage.records.get('batch_x')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    } finally {
      await storage.close();
      await nats.stop();
    }
  });

  it('refuses bad options by name', async () => {
    await expect(openNatsBatchStorage({ url: 'redis://x' })).rejects.toThrow(/`url`/);
    await expect(openNatsBatchStorage({ url: 'nats://x', prefix: 'a.b' })).rejects.toThrow(/`prefix`/);
  });

  it('fails with 503 UNAVAILABLE when NATS does not answer, naming it without its password', async () => {
    const opening = openNatsBatchStorage({ url: 'nats://user:secret@127.0.0.1:1', connectTimeoutMs: 200 });
    await expect(opening).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await expect(opening).rejects.toThrow('nats://127.0.0.1:1');
    await expect(opening).rejects.not.toThrow('secret');
  });
});
