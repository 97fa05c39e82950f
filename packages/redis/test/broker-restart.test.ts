// A worker outlives its broker: Redis is SIGKILLed while the worker streams, and restarted (empty, same port). The
// worker, in its own process, must neither exit nor leave a rejection unhandled (a chunk write that failed mid-batch
// used to end it with `Error: read ECONNRESET`); it reports the loss once, pulls nothing while Redis is gone, and
// serves new requests once Redis is back.
import { type RedisQueue, createRedisQueue } from '@microbatch/redis';
import { type TestRedis, startRedisServer } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChildWorker, startChildWorker, until } from './helpers.js';

let redis: TestRedis;
let worker: ChildWorker | undefined;
let replica: RedisQueue | undefined;

beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await replica?.close({ force: true });
  await worker?.process.stop(1_000);
  await redis.stop();
});

const logs = (child: ChildWorker): string[] =>
  child.process.jsonLines().flatMap((line) => (line as { log?: string }).log ?? []);

describe('a Redis worker whose broker is killed and restarted', () => {
  it('stays up with streams in flight (no exit, no unhandled rejection) and serves new requests after the restart', async () => {
    const queue = 'restart';
    worker = await startChildWorker({
      REDIS_URL: redis.url,
      QUEUE: queue,
      MODE: 'answer',
      LOG: '1',
      TICK_MS: '10',
      CONCURRENCY: '3',
    });
    replica = createRedisQueue({ url: redis.url, queue });
    await replica.ready;
    await until('the replica to see the worker', () => replica!.isReady());
    const tick = replica.streamingBatcher<string, string>('tick');
    // Three streams, one batch each, long enough to be in flight when Redis dies.
    const received = [0, 0, 0];
    const streams = ['a', 'b', 'c'].map(async (name, index) => {
      try {
        for await (const _chunk of tick.stream(`${name}:100000`)) received[index] = (received[index] as number) + 1;
        return 'ended';
      } catch (error) {
        return error;
      }
    });
    await until('every stream to be under way', () => received.every((count) => count >= 3));
    await redis.kill();
    // Their replica lost Redis too: it answers them 503 (what was sent cannot be resumed through an empty Redis).
    for (const outcome of await Promise.all(streams)) expect(outcome).toMatchObject({ code: 'UNAVAILABLE' });
    await redis.restart();
    // (A worker that exited is reported at once, with what it printed.)
    const exited = () => worker!.process.exitInfo() !== undefined;
    await until('the replica to see the worker again', async () => exited() || (await replica!.isReady()));
    if (exited()) throw new Error(`The worker exited:\n${worker.process.output()}`);

    // The same worker process serves new requests: a call and a whole stream.
    const echo = replica.batcher<string, string>('echo');
    expect(await echo('again')).toBe('echo:again');
    const chunks: string[] = [];
    for await (const chunk of tick.stream('d:3')) chunks.push(chunk);
    expect(chunks).toEqual(['d:3#0', 'd:3#1', 'd:3#2']);

    expect(exited()).toBe(false);
    expect(worker.process.stderr()).not.toMatch(/unhandled|ECONNRESET|Error:/i);
    // The loss and the return, reported once each (never once per failed write).
    const lines = logs(worker);
    expect(lines.filter((line) => line.includes('lost the queue'))).toHaveLength(1);
    expect(lines.filter((line) => line.includes('connected to the queue'))).toHaveLength(2);
  }, 120_000);
});
