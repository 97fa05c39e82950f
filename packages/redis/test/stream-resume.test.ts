// A stream survives its worker on Redis (a worker killed by the test, and the deadline without a rescuer, run on both
// transports in test/transport/stream-resume.test.ts): the caller's stream must equal an uninterrupted run,
// exactly once wherever the worker dies, each point reached by counting chunks (fixtures/model-worker.ts KILL_AT):
// before its first chunk, mid-stream, and after its final chunk but before the stream's end. The fourth point, between
// a chunk and its progress record, does not exist on Redis: the `CHUNK` script writes both atomically.
import { fileURLToPath } from 'node:url';
import type { TextGenerationChunk, TextGenerationInput } from '@microbatch/inference';
import { createRedisQueue } from '@microbatch/redis';
import { type ChildHandle, type TestRedis, startProcess, startRedisServer } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from './helpers.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const MODEL = fileURLToPath(new URL('../../../models/tinystories-656k', import.meta.url));
const QUEUE = 'resume';

let redis: TestRedis;
const children: ChildHandle[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
});
afterAll(async () => {
  await Promise.all(children.map((child) => child.stop(1_000)));
  await redis.stop();
});

async function startModelWorker(queue = QUEUE, env: Record<string, string> = {}): Promise<ChildHandle> {
  const script = fileURLToPath(new URL('./fixtures/model-worker.ts', import.meta.url));
  const child = startProcess({
    args: ['--import', 'tsx', script],
    cwd: root,
    env: {
      ...process.env,
      REDIS_URL: redis.url,
      QUEUE: queue,
      MODEL,
      STEP_DELAY_MS: '20',
      CLAIM_IDLE_MS: '300',
      ...env,
    },
  });
  children.push(child);
  await child.nextJson((line) => typeof (line as { ready?: unknown }).ready === 'string', 120_000);
  return child;
}

const INPUT: TextGenerationInput = { prompt: 'Once upon a time', max_new_tokens: 48, temperature: 0 };

/** The uninterrupted greedy run of {@link INPUT}, once (its own worker, queue and replica). */
let referenceRun: Promise<TextGenerationChunk[]> | undefined;
function reference(): Promise<TextGenerationChunk[]> {
  referenceRun ??= (async () => {
    const queue = 'resume-reference';
    const worker = await startModelWorker(queue);
    const replica = createRedisQueue({ url: redis.url, queue });
    await replica.ready;
    await until('the worker alive', async () => (await replica.workersAlive()) === 1);
    const chunks: TextGenerationChunk[] = [];
    for await (const chunk of replica
      .streamingBatcher<TextGenerationInput, TextGenerationChunk>('stream')
      .stream(INPUT))
      chunks.push(chunk);
    await replica.close();
    await worker.stop(1_000);
    return chunks;
  })();
  return referenceRun;
}

const logsOf = (child: ChildHandle): string[] =>
  child.jsonLines().flatMap((line) => (line as { log?: string }).log ?? []);

describe('a stream whose worker dies (Redis, the bundled model)', () => {
  it.each([
    { point: 'before its first chunk', killAt: 'first' },
    { point: 'mid-stream, once chunk 6 is in Redis', killAt: '6' },
    { point: 'after its final chunk and before its end', killAt: 'last' },
  ])(
    'dies $point: the stream ends once, equal byte for byte to an uninterrupted run',
    async ({ killAt }) => {
      const whole = await reference();
      const wholeTokens = whole.flatMap((chunk) => chunk.tokens ?? []);
      const queue = `resume-${killAt}`;
      const doomed = await startModelWorker(queue, { KILL_AT: killAt });
      // No worker is alive between the kill and the rescuer's start: the stream waits for it through the grace.
      const replica = createRedisQueue({ url: redis.url, queue, workerGraceMs: 120_000 });
      await replica.ready;
      await until('the worker alive', async () => (await replica.workersAlive()) === 1);
      const chunks: TextGenerationChunk[] = [];
      const reading = (async () => {
        for await (const chunk of replica
          .streamingBatcher<TextGenerationInput, TextGenerationChunk>('stream')
          .stream(INPUT))
          chunks.push(chunk);
      })();
      // It kills itself at the point (counted in chunks); the rescuer starts only then, so it cannot take the stream first.
      const exit = await doomed.exited;
      expect(exit.signal).toBe('SIGKILL');
      const killedAfter = (
        doomed.jsonLines().find((line) => typeof (line as { killed?: unknown }).killed === 'number') as {
          killed: number;
        }
      ).killed;
      const rescuer = await startModelWorker(queue);
      await reading;
      const tokens = chunks.flatMap((chunk) => chunk.tokens ?? []);
      const resumed = logsOf(rescuer).find((line) => line.includes('resuming'));
      console.log(
        `[stream resume, killed ${killAt}] ${wholeTokens.length} tokens uninterrupted; ${killedAfter} in Redis at the ` +
          `kill; received ${tokens.length} in ${chunks.length} chunks; rescuer: ${resumed}`,
      );
      // The rescuer continued after exactly what the dead worker's chunks carried.
      expect(resumed).toContain(`resuming 1 stream(s) after ${killedAfter} token(s) sent`);
      if (killAt === 'first') expect(killedAfter).toBe(0);
      if (killAt === 'last') expect(killedAfter).toBe(wholeTokens.length);
      // 0 repeated, 0 skipped: the same ids, the same text byte for byte, one end.
      expect(tokens).toEqual(wholeTokens);
      expect(chunks.map((chunk) => chunk.text).join('')).toBe(whole.map((chunk) => chunk.text).join(''));
      expect(chunks.filter((chunk) => chunk.finish_reason !== null)).toHaveLength(1);
      expect(chunks.at(-1)?.finish_reason).toBe(whole.at(-1)?.finish_reason);
      expect(chunks.at(-1)?.usage).toEqual(whole.at(-1)?.usage);
      await replica.close();
      await rescuer.stop(1_000);
    },
    180_000,
  );
});
