// A stream survives its worker, on each transport (drivers.ts): model worker processes (the bundled model, continuous
// scheduling; packages/redis/test/fixtures/model-worker.ts on either transport) on one queue; the one streaming a
// greedy generation is SIGKILLed mid-stream, and another continues it from the prompt plus the token ids already
// sent. The caller's stream must equal an uninterrupted run, with no token sent twice; with no other worker, the
// stream fails at its deadline after what was sent. Each package's stream-resume.test.ts kills its worker at the
// points its own broker makes (between a chunk and its progress record, and the like).
import { fileURLToPath } from 'node:url';
import type { TextGenerationChunk, TextGenerationInput } from '@microbatch/inference';
import { type ChildHandle, startProcess } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestBroker, type TestQueue, drivers, until } from './drivers.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const MODEL = fileURLToPath(new URL('../../models/tinystories-656k', import.meta.url));
const MODEL_WORKER = fileURLToPath(new URL('../../packages/redis/test/fixtures/model-worker.ts', import.meta.url));
const INPUT: TextGenerationInput = { prompt: 'Once upon a time', max_new_tokens: 48, temperature: 0 };

const stepsOf = (child: ChildHandle): number =>
  child.jsonLines().filter((line) => typeof (line as { step?: unknown }).step === 'number').length;

describe.each(drivers)('a stream whose worker dies ($name, the bundled model)', (driver) => {
  let broker: TestBroker;
  const children: ChildHandle[] = [];

  beforeAll(async () => {
    broker = await driver.startBroker();
  });
  afterAll(async () => {
    await Promise.all(children.map((child) => child.stop(1_000)));
    await broker.stop();
  });

  async function startModelWorker(queue: string): Promise<ChildHandle> {
    const child = startProcess({
      args: ['--import', 'tsx', MODEL_WORKER],
      cwd: root,
      env: {
        ...process.env,
        ...driver.processEnv(broker.url),
        QUEUE: queue,
        MODEL,
        STEP_DELAY_MS: '20',
        CLAIM_IDLE_MS: '300',
      },
    });
    children.push(child);
    await child.nextJson((line) => typeof (line as { ready?: unknown }).ready === 'string', 120_000);
    return child;
  }

  /** A replica that waits a minute for workers (a stream waits for the take-over instead of failing with 503). */
  async function openReplica(queue: string, workers: number): Promise<TestQueue> {
    const replica = driver.replica(broker.url, queue, { heartbeatTtlMs: 60_000 });
    await replica.ready;
    await until(`${workers} worker(s) alive`, async () => (await replica.workersAlive()) === workers);
    return replica;
  }

  it('finishes on another worker from the token ids sent: equal to an uninterrupted greedy run, no token twice', async () => {
    const workers = [await startModelWorker('resume'), await startModelWorker('resume')];
    const replica = await openReplica('resume', 2);
    const streamer = replica.streamingBatcher<TextGenerationInput, TextGenerationChunk>('stream');

    const reference: TextGenerationChunk[] = [];
    for await (const chunk of streamer.stream(INPUT)) reference.push(chunk);
    const referenceTokens = reference.flatMap((chunk) => chunk.tokens ?? []);
    const referenceText = reference.map((chunk) => chunk.text).join('');
    expect(referenceTokens.length).toBeGreaterThan(20);
    expect(reference.at(-1)?.usage?.completion_tokens).toBe(referenceTokens.length);

    const before = workers.map(stepsOf);
    const chunks: TextGenerationChunk[] = [];
    let killed: ChildHandle | undefined;
    let tokensBeforeKill = 0;
    for await (const chunk of streamer.stream(INPUT)) {
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
      `[stream resume, ${driver.name}] reference ${referenceTokens.length} tokens; killed after 6 chunks ` +
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
    const replica = await openReplica(queue, 1);
    const streamer = replica.streamingBatcher<TextGenerationInput, TextGenerationChunk>('stream');
    // The deadline is three whole uninterrupted runs, as long as this machine takes now: the first chunks always
    // come within it, and after the kill nobody is left to resume the stream.
    const started = performance.now();
    let whole = 0;
    for await (const _chunk of streamer.stream(INPUT)) whole += 1;
    const timeoutMs = Math.max(3_000, 3 * (performance.now() - started));
    const chunks: TextGenerationChunk[] = [];
    let failure: unknown;
    try {
      for await (const chunk of streamer.stream(INPUT, { timeoutMs })) {
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
});
