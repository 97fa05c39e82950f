// A stream survives its worker: two model worker processes (the bundled model, continuous scheduling) on one queue;
// the one streaming a greedy generation is SIGKILLed mid-stream, and the other continues it from the prompt plus
// the token ids already sent. The caller's stream must equal an uninterrupted run, with no token sent twice.
// Exactly once wherever the worker dies, each point reached by counting chunks (fixtures/model-worker.ts KILL_AT):
// before its first chunk, mid-stream, and after its final chunk but before the stream's end. The fourth point, between
// a chunk and its progress record, does not exist on Redis: the `CHUNK` script writes both atomically.
import { fileURLToPath } from 'node:url';
import type { TextGenerationChunk, TextGenerationInput } from '@microbatch/inference';
import { type RedisQueue, createRedisQueue } from '@microbatch/redis';
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

const stepsOf = (child: ChildHandle): number =>
  child.jsonLines().filter((line) => typeof (line as { step?: unknown }).step === 'number').length;

describe('a stream whose worker dies (Redis, the bundled model)', () => {
  it('finishes on another worker from the token ids sent: equal to an uninterrupted greedy run, no token twice', async () => {
    const workers = [await startModelWorker(), await startModelWorker()];
    // Workers are expected back within a minute: the stream waits for the take-over instead of failing with 503.
    const replica: RedisQueue = createRedisQueue({ url: redis.url, queue: QUEUE, heartbeatTtlMs: 60_000 });
    await replica.ready;
    await until('both workers alive', async () => (await replica.workersAlive()) === 2);
    const streamer = replica.streamingBatcher<TextGenerationInput, TextGenerationChunk>('stream');
    const input: TextGenerationInput = { prompt: 'Once upon a time', max_new_tokens: 48, temperature: 0 };

    const reference: TextGenerationChunk[] = [];
    for await (const chunk of streamer.stream(input)) reference.push(chunk);
    const referenceTokens = reference.flatMap((chunk) => chunk.tokens ?? []);
    const referenceText = reference.map((chunk) => chunk.text).join('');
    expect(referenceTokens.length).toBeGreaterThan(20);
    expect(reference.at(-1)?.usage?.completion_tokens).toBe(referenceTokens.length);

    const before = workers.map(stepsOf);
    const chunks: TextGenerationChunk[] = [];
    let killed: ChildHandle | undefined;
    let tokensBeforeKill = 0;
    for await (const chunk of streamer.stream(input)) {
      chunks.push(chunk);
      if (killed === undefined && chunks.length === 6) {
        // The worker streaming it: the one whose step count moved.
        killed = workers.find((child, index) => stepsOf(child) > (before[index] as number));
        expect(killed).toBeDefined();
        killed!.child.kill('SIGKILL');
        await killed!.exited;
        tokensBeforeKill = chunks.flatMap((sent) => sent.tokens ?? []).length;
      }
    }
    const rescuer = workers.find((child) => child !== killed) as ChildHandle;
    const resumed = rescuer
      .jsonLines()
      .map((line) => (line as { log?: string }).log ?? '')
      .find((line) => line.includes('resuming'));
    const tokens = chunks.flatMap((chunk) => chunk.tokens ?? []);
    console.log(
      `[stream resume] reference ${referenceTokens.length} tokens; killed after 6 chunks ` +
        `(${tokensBeforeKill} tokens received); rescuer: ${resumed}`,
    );
    expect(killed?.exitInfo()?.signal).toBe('SIGKILL');
    // The rescuer continued after what the dead worker's chunks carried, not from the start.
    expect(resumed).toMatch(/resuming 1 stream\(s\) after [1-9]\d* token\(s\) sent/);
    // Every token once, in order: the same ids and text as the uninterrupted run.
    expect(tokens).toEqual(referenceTokens);
    expect(chunks.map((chunk) => chunk.text).join('')).toBe(referenceText);
    expect(chunks.at(-1)?.finish_reason).toBe(reference.at(-1)?.finish_reason);
    expect(chunks.at(-1)?.usage).toEqual(reference.at(-1)?.usage);
    await replica.close();
  }, 180_000);

  it('fails a stream that cannot resume within its deadline (no other worker): 504 after what was sent', async () => {
    const queue = 'resume-deadline';
    const lone = await startModelWorker(queue);
    const replica: RedisQueue = createRedisQueue({ url: redis.url, queue, heartbeatTtlMs: 60_000 });
    await replica.ready;
    await until('the worker alive', async () => (await replica.workersAlive()) === 1);
    const streamer = replica.streamingBatcher<TextGenerationInput, TextGenerationChunk>('stream');
    const input: TextGenerationInput = { prompt: 'Once upon a time', max_new_tokens: 48, temperature: 0 };
    // The deadline is three whole uninterrupted runs, as long as this machine takes now: the first chunks always
    // come within it, and after the kill nobody is left to resume the stream.
    const started = performance.now();
    let whole = 0;
    for await (const _chunk of streamer.stream(input)) whole += 1;
    const timeoutMs = Math.max(3_000, 3 * (performance.now() - started));
    const chunks: TextGenerationChunk[] = [];
    let failure: unknown;
    try {
      for await (const chunk of streamer.stream(input, { timeoutMs })) {
        chunks.push(chunk);
        if (chunks.length === 6) {
          lone.child.kill('SIGKILL');
          await lone.exited;
        }
      }
    } catch (error) {
      failure = error;
    }
    // Chunks the worker sent before the kill landed may still arrive; the stream never completes.
    expect(chunks.length).toBeGreaterThanOrEqual(6);
    expect(chunks.length).toBeLessThan(whole);
    expect(chunks.at(-1)?.finish_reason ?? null).toBeNull();
    expect(failure).toMatchObject({ code: 'DEADLINE_EXCEEDED' });
    await replica.close();
  }, 180_000);
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
