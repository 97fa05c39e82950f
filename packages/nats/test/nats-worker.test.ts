// What is NATS's own (the shared behaviour is in test/transport/): entries nobody waits for any more, put straight
// into the stream, are skipped by their deadline (the stream's clock) or acknowledged as unreadable, never run.
import { createNatsQueue, createNatsWorker } from '@microbatch/nats';
import { type TestNats, pollUntil, startNatsServer } from '@microbatch/test-kit';
import { DiscardPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let nats: TestNats;
beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(() => nats.stop());

async function until(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  const { ok } = await pollUntil(async () => await check(), Boolean, 60_000, 10);
  if (!ok) throw new Error(`Gave up waiting for ${what}`);
}

describe('createNatsWorker', () => {
  it('skips an entry past its deadline and acknowledges an unreadable one: neither runs nor stays queued', async () => {
    const connection = await connect({ servers: nats.url.replace('nats://', '') });
    const manager = await jetstreamManager(connection);
    await manager.streams.add({
      name: 'microbatch_raw',
      subjects: ['microbatch.raw.requests'],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      discard: DiscardPolicy.New,
    });
    const js = jetstream(connection);
    // A replica that died left these: one with a 1 ms deadline (from when the stream stored it), one not ours.
    const fields = ['i', 'z', 'h', 'double', 'r', 'gone', 't', '1', 's', '0', 'p', '3'];
    const stored = Date.now();
    await js.publish('microbatch.raw.requests', JSON.stringify(fields));
    await js.publish('microbatch.raw.requests', 'not an entry');
    // Past its deadline before any worker exists (a bound on order, not a timing assertion).
    await until('the deadline to pass', () => Date.now() > stored + 5);
    const ran: unknown[][] = [];
    const worker = createNatsWorker<number, number>({
      url: nats.url,
      queue: 'raw',
      log: false,
      handlers: { double: async (inputs) => (ran.push([...inputs]), inputs.map((input) => input * 2)) },
    });
    await worker.ready;
    await until(
      'both entries to leave the stream',
      async () => (await manager.streams.info('microbatch_raw')).state.messages === 0,
    );
    expect(worker.stats()).toMatchObject({ expired: 1, batches: 0 });
    expect(ran).toEqual([]);
    await connection.close();
    await worker.close();
  });

  it('drops the entries of a replica gone silent (killed) instead of running them for nobody', async () => {
    const connection = await connect({ servers: nats.url.replace('nats://', '') });
    const js = jetstream(connection);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const ran: number[][] = [];
    const worker = createNatsWorker<number, number>({
      url: nats.url,
      queue: 'orphans',
      log: false,
      handlers: {
        double: async (inputs) => {
          ran.push([...inputs]);
          await gate;
          return inputs.map((input) => input * 2);
        },
      },
    });
    await worker.ready;
    const entry = (reply: string, input: number) =>
      JSON.stringify(['i', String(input), 'h', 'double', 'r', reply, 't', '', 's', '0', 'p', String(input)]);
    // The worker's only slot is busy with a live replica's entry while the ghost's two wait in the stream.
    await js.publish('microbatch.orphans.requests', entry('alive', 1));
    await until('the first batch to start', () => ran.length === 1);
    connection.publish('microbatch.orphans.replicas', JSON.stringify({ reply: 'ghost', ttlMs: 50 }));
    await js.publish('microbatch.orphans.requests', entry('ghost', 2));
    await js.publish('microbatch.orphans.requests', entry('ghost', 3));
    // The ghost says nothing more: past its TTL (a bound on order, not a timing assertion) it is gone.
    const silentSince = Date.now();
    await until('the ghost to be past its TTL', () => Date.now() > silentSince + 200);
    release();
    const manager = await jetstreamManager(connection);
    await until(
      'the stream to be empty',
      async () => (await manager.streams.info('microbatch_orphans')).state.messages === 0,
    );
    expect(ran).toEqual([[1]]);
    expect(worker.stats()).toMatchObject({ orphaned: 2, batches: 1 });
    await connection.close();
    await worker.close();
  });

  it("keeps `a.b` and `a_b` two queues on one server: each one's calls go to its own worker only", async () => {
    const names = ['a.b', 'a_b'] as const;
    const workers = names.map((queue) =>
      createNatsWorker<string, string>({
        url: nats.url,
        queue,
        log: false,
        heartbeatMs: 100,
        handlers: { whoami: async (inputs) => inputs.map((input) => `${queue}:${input}`) },
      }),
    );
    const replicas = names.map((queue) => createNatsQueue({ url: nats.url, queue }));
    await Promise.all([...workers, ...replicas].map((part) => part.ready));
    for (const replica of replicas) await until('its worker alive', async () => (await replica.workersAlive()) === 1);
    const answers = await Promise.all(
      replicas.flatMap((replica) =>
        [1, 2, 3].map((input) => replica.batcher<string, string>('whoami').call(String(input))),
      ),
    );
    expect(answers).toEqual(['a.b:1', 'a.b:2', 'a.b:3', 'a_b:1', 'a_b:2', 'a_b:3']);
    expect(workers.map((worker) => worker.stats().items)).toEqual([3, 3]);
    await Promise.all([...replicas, ...workers].map((part) => part.close()));
  });
});
