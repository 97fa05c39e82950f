// A stream survives its worker over NATS: two model worker processes (the bundled model, continuous scheduling; the
// Redis test's fixture on NATS) on one queue; the one streaming a greedy generation is SIGKILLed mid-stream, and the
// other, delivered the entry again after `claimIdleMs`, continues it from the prompt plus the token ids the progress
// stream holds. The caller's stream must equal an uninterrupted run, with no token sent twice.
import { fileURLToPath } from 'node:url';
import type { TextGenerationChunk, TextGenerationInput } from '@microbatch/inference';
import { type NatsQueue, createNatsQueue } from '@microbatch/nats';
import { type ChildHandle, type TestNats, pollUntil, startNatsServer, startProcess } from '@microbatch/test-kit';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const MODEL = fileURLToPath(new URL('../../../models/tinystories-656k', import.meta.url));
const QUEUE = 'resume';

let nats: TestNats;
const children: ChildHandle[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(async () => {
  await Promise.all(children.map((child) => child.stop(1_000)));
  await nats.stop();
});

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const { ok } = await pollUntil(async () => await check(), Boolean, 60_000, 10);
  if (!ok) throw new Error(`Gave up waiting for ${what}`);
}

async function startModelWorker(queue = QUEUE): Promise<ChildHandle> {
  const script = fileURLToPath(new URL('../../redis/test/fixtures/model-worker.ts', import.meta.url));
  const child = startProcess({
    args: ['--import', 'tsx', script],
    cwd: root,
    env: {
      ...process.env,
      TRANSPORT: 'nats',
      NATS_URL: nats.url,
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

const stepsOf = (child: ChildHandle): number =>
  child.jsonLines().filter((line) => typeof (line as { step?: unknown }).step === 'number').length;

describe('a stream whose worker dies (NATS, the bundled model)', () => {
  it('finishes on another worker from the token ids sent: equal to an uninterrupted greedy run, no token twice', async () => {
    const workers = [await startModelWorker(), await startModelWorker()];
    const replica: NatsQueue = createNatsQueue({ url: nats.url, queue: QUEUE, heartbeatTtlMs: 60_000 });
    await replica.ready;
    await until('both workers alive', async () => (await replica.workersAlive()) === 2);
    const streamer = replica.streamingBatcher<TextGenerationInput, TextGenerationChunk>('stream');
    const input: TextGenerationInput = { prompt: 'Once upon a time', max_new_tokens: 48, temperature: 0 };

    const reference: TextGenerationChunk[] = [];
    for await (const chunk of streamer.stream(input)) reference.push(chunk);
    const referenceTokens = reference.flatMap((chunk) => chunk.tokens ?? []);
    const referenceText = reference.map((chunk) => chunk.text).join('');
    expect(referenceTokens.length).toBeGreaterThan(20);

    const before = workers.map(stepsOf);
    const chunks: TextGenerationChunk[] = [];
    let killed: ChildHandle | undefined;
    let tokensBeforeKill = 0;
    for await (const chunk of streamer.stream(input)) {
      chunks.push(chunk);
      if (killed === undefined && chunks.length === 6) {
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
      `[stream resume, NATS] reference ${referenceTokens.length} tokens; killed after 6 chunks ` +
        `(${tokensBeforeKill} tokens received); rescuer: ${resumed}`,
    );
    expect(killed?.exitInfo()?.signal).toBe('SIGKILL');
    expect(resumed).toMatch(/resuming 1 stream\(s\) after [1-9]\d* token\(s\) sent/);
    expect(tokens).toEqual(referenceTokens);
    expect(chunks.map((chunk) => chunk.text).join('')).toBe(referenceText);
    expect(chunks.at(-1)?.finish_reason).toBe(reference.at(-1)?.finish_reason);
    expect(chunks.at(-1)?.usage).toEqual(reference.at(-1)?.usage);

    // Answered streams leave no progress behind (the rescuer purged the resumed one's).
    const connection = await connect({ servers: nats.url.replace('nats://', '') });
    try {
      const manager = await jetstreamManager(connection);
      await until(
        'the progress stream to empty',
        async () => (await manager.streams.info('microbatch_resume_progress')).state.messages === 0,
      );
    } finally {
      await connection.close();
    }
    await replica.close();
  }, 180_000);

  it('fails a stream that cannot resume within its deadline (no other worker): 504 after what was sent', async () => {
    const queue = 'resume-deadline';
    const lone = await startModelWorker(queue);
    const replica: NatsQueue = createNatsQueue({ url: nats.url, queue, heartbeatTtlMs: 60_000 });
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
});
