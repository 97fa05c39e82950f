// A stream survives its worker over NATS, exactly once wherever the worker dies: two model worker processes (the
// bundled model, continuous scheduling; the Redis test's fixture on NATS, through `fixtures/dying-worker.ts`) on one
// queue; the first to reach the chosen point of the stream (counted in chunks and progress records, never timed)
// SIGKILLs itself, and the other, delivered the entry again after `claimIdleMs`, re-sends the chunk the last record
// preceded and continues from the record's token ids. The caller's stream must equal an uninterrupted greedy run:
// no token repeated, none skipped. (A worker killed by the test, and the deadline without a rescuer, run on both
// transports in test/transport/stream-resume.test.ts.)
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TextGenerationChunk, TextGenerationInput } from '@microbatch/inference';
import { type NatsQueue, createNatsQueue, encodeQueueName } from '@microbatch/nats';
import { type ChildHandle, type TestNats, pollUntil, startNatsServer, startProcess } from '@microbatch/test-kit';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const MODEL = fileURLToPath(new URL('../../../models/tinystories-656k', import.meta.url));
const MODEL_WORKER = fileURLToPath(new URL('../../redis/test/fixtures/model-worker.ts', import.meta.url));
const DYING_WORKER = fileURLToPath(new URL('fixtures/dying-worker.ts', import.meta.url));
const INPUT: TextGenerationInput = { prompt: 'Once upon a time', max_new_tokens: 48, temperature: 0 };

let nats: TestNats;
const children: ChildHandle[] = [];
const markers = mkdtempSync(join(tmpdir(), 'nats-resume-'));

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

async function startModelWorker(queue: string, env: Record<string, string> = {}): Promise<ChildHandle> {
  const child = startProcess({
    args: ['--import', 'tsx', env.KILL_AT === undefined ? MODEL_WORKER : DYING_WORKER],
    cwd: root,
    env: {
      ...process.env,
      TRANSPORT: 'nats',
      NATS_URL: nats.url,
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

async function openReplica(queue: string, workers: number): Promise<NatsQueue> {
  const replica = createNatsQueue({ url: nats.url, queue, heartbeatTtlMs: 60_000 });
  await replica.ready;
  await until(`${workers} worker(s) alive`, async () => (await replica.workersAlive()) === workers);
  return replica;
}

async function streamOf(replica: NatsQueue, input: TextGenerationInput): Promise<TextGenerationChunk[]> {
  const chunks: TextGenerationChunk[] = [];
  const streamer = replica.streamingBatcher<TextGenerationInput, TextGenerationChunk>('stream');
  for await (const chunk of streamer.stream(input)) chunks.push(chunk);
  return chunks;
}

const tokensOf = (chunks: readonly TextGenerationChunk[]): number[] => chunks.flatMap((chunk) => chunk.tokens ?? []);
const logsOf = (child: ChildHandle): string[] => child.jsonLines().map((line) => (line as { log?: string }).log ?? '');

describe('a stream whose worker dies (NATS, the bundled model)', () => {
  let reference: TextGenerationChunk[] = [];

  beforeAll(async () => {
    // The uninterrupted greedy run, on a worker that never dies.
    const worker = await startModelWorker('resume');
    const replica = await openReplica('resume', 1);
    reference = await streamOf(replica, INPUT);
    await replica.close();
    await worker.stop(1_000);
    expect(tokensOf(reference).length).toBeGreaterThan(20);
    expect(reference.length).toBeGreaterThan(6);
  }, 180_000);

  // The point, and how many of the reference's chunks went out before it (the token ids the successor resumes after).
  it.each([
    ['before its first chunk (as it would store the first record)', 'first-record', () => 0],
    ['mid-stream (after chunk 6, before the next record)', 'chunk:6', () => 6],
    ['between a record and its chunk (record 6 stored, chunk 6 not sent)', 'record:6', () => 6],
    ['at its last chunk (the final chunk sent, the end not)', 'final', () => reference.length],
  ])(
    'dies %s: the stream finishes on the other worker, equal to the uninterrupted run',
    async (_, killAt, sentBefore) => {
      const queue = `resume-${killAt}`;
      const env = { KILL_AT: killAt, MARKER: join(markers, encodeQueueName(queue)) };
      const workers = await Promise.all([startModelWorker(queue, env), startModelWorker(queue, env)]);
      const replica = await openReplica(queue, 2);
      const chunks = await streamOf(replica, INPUT);
      await until('the dying worker to exit', () => workers.some((child) => child.exitInfo() !== undefined));
      const killed = workers.filter((child) => child.exitInfo()?.signal === 'SIGKILL');
      expect(killed).toHaveLength(1);
      expect(killed[0]?.jsonLines().some((line) => (line as { dying?: unknown }).dying === killAt)).toBe(true);
      const rescuer = workers.find((child) => child !== killed[0]) as ChildHandle;
      const resumed = logsOf(rescuer).find((line) => line.includes('resuming'));
      const expectedTokens = tokensOf(reference.slice(0, sentBefore())).length;
      console.log(
        `[stream resume, NATS] ${killAt}: reference ${reference.length} chunks, ${tokensOf(reference).length} tokens; ` +
          `received ${chunks.length} chunks, ${tokensOf(chunks).length} tokens; rescuer: ${resumed}`,
      );
      expect(resumed).toContain(`resuming 1 stream(s) after ${expectedTokens} token(s) sent`);
      // Byte for byte: no token repeated, none skipped.
      expect(tokensOf(chunks)).toEqual(tokensOf(reference));
      expect(chunks.map((chunk) => chunk.text).join('')).toBe(reference.map((chunk) => chunk.text).join(''));
      expect(chunks.filter((chunk) => chunk.finish_reason != null)).toHaveLength(1);
      expect(chunks.at(-1)?.finish_reason).toBe(reference.at(-1)?.finish_reason);
      expect(chunks.at(-1)?.usage).toEqual(reference.at(-1)?.usage);

      // Answered streams leave no progress behind (the rescuer purged the resumed one's).
      const connection = await connect({ servers: nats.url.replace('nats://', '') });
      try {
        const manager = await jetstreamManager(connection);
        const progress = `microbatch_${encodeQueueName(queue)}_progress`;
        await until(
          'the progress stream to empty',
          async () => (await manager.streams.info(progress)).state.messages === 0,
        );
      } finally {
        await connection.close();
      }
      await replica.close();
      await rescuer.stop(1_000);
    },
    180_000,
  );
});
