// A worker process survives its broker: NATS is SIGKILLed while a model worker (the bundled model, continuous
// scheduling; the stream-resume fixture) streams, then restarted on the same store. The worker logs the loss once,
// stops pulling, keeps the batch it runs (its answers wait in the client's reconnect buffer, acknowledged once NATS
// has them), reconnects and serves the next stream; the replica answers each stream in flight exactly once (what
// finished, or 503 when NATS went).
import { fileURLToPath } from 'node:url';
import type { TextGenerationChunk, TextGenerationInput } from '@microbatch/inference';
import { type NatsQueue, createNatsQueue } from '@microbatch/nats';
import { type ChildHandle, type TestNats, pollUntil, startNatsServer, startProcess } from '@microbatch/test-kit';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const MODEL = fileURLToPath(new URL('../../../models/tinystories-656k', import.meta.url));
const MODEL_WORKER = fileURLToPath(new URL('../../redis/test/fixtures/model-worker.ts', import.meta.url));
const QUEUE = 'broker-restart';
const INPUT: TextGenerationInput = { prompt: 'Once upon a time', max_new_tokens: 48, temperature: 0 };

let nats: TestNats;
let worker: ChildHandle | undefined;
beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(async () => {
  await worker?.stop(1_000);
  await nats.stop();
});

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const { ok } = await pollUntil(async () => await check(), Boolean, 60_000, 10);
  if (!ok) throw new Error(`Gave up waiting for ${what}`);
}

interface Outcome {
  readonly chunks: TextGenerationChunk[];
  readonly error: unknown;
  /** How many times the stream ended (its last chunk read, or a failure): exactly once. */
  readonly ends: number;
}

async function consume(stream: AsyncIterable<TextGenerationChunk>, onChunk: () => void): Promise<Outcome> {
  const chunks: TextGenerationChunk[] = [];
  let ends = 0;
  try {
    for await (const chunk of stream) {
      chunks.push(chunk);
      onChunk();
    }
    ends += 1;
    return { chunks, error: undefined, ends };
  } catch (error) {
    ends += 1;
    return { chunks, error, ends };
  }
}

const textOf = (chunks: readonly TextGenerationChunk[]): string => chunks.map((chunk) => chunk.text).join('');
const logsOf = (child: ChildHandle): string[] =>
  child.jsonLines().flatMap((line) => (line as { log?: string }).log ?? []);

describe('a NATS worker whose broker is SIGKILLed and restarted with streams in flight', () => {
  it('stays up, logs the loss once, reconnects and serves the next stream whole', async () => {
    worker = startProcess({
      args: ['--import', 'tsx', MODEL_WORKER],
      cwd: root,
      env: { ...process.env, TRANSPORT: 'nats', NATS_URL: nats.url, QUEUE, MODEL, STEP_DELAY_MS: '20' },
    });
    await worker.nextJson((line) => typeof (line as { ready?: unknown }).ready === 'string', 120_000);
    const replica: NatsQueue = createNatsQueue({ url: nats.url, queue: QUEUE, heartbeatTtlMs: 60_000 });
    await replica.ready;
    await until('the worker alive', async () => (await replica.workersAlive()) === 1);
    const streamer = replica.streamingBatcher<TextGenerationInput, TextGenerationChunk>('stream');
    const reference = await consume(streamer.stream(INPUT), () => undefined);
    expect(reference.error).toBeUndefined();

    // Three streams in flight (one running, the others queued behind it: the worker has one slot); NATS dies once
    // the running one has sent a chunk.
    let received = 0;
    const inFlight = Promise.all([0, 1, 2].map(() => consume(streamer.stream(INPUT), () => (received += 1))));
    await until('a chunk of a stream in flight', () => received > 0);
    await nats.kill();
    const outcomes = await inFlight;
    for (const outcome of outcomes) {
      expect(outcome.ends).toBe(1);
      // Finished before NATS went, or refused with 503 when it did: never half an answer called whole.
      if (outcome.error === undefined) expect(textOf(outcome.chunks)).toBe(textOf(reference.chunks));
      else expect(outcome.error).toMatchObject({ code: 'UNAVAILABLE' });
    }
    expect(outcomes.some((outcome) => outcome.error !== undefined)).toBe(true);

    await nats.restart();
    await until(
      'the worker to reconnect',
      () => logsOf(worker as ChildHandle).filter((line) => line.includes('connected to the queue')).length === 2,
    );
    await until('the replica to see the worker', async () => (await replica.workersAlive()) === 1);
    const after = await consume(streamer.stream(INPUT), () => undefined);
    expect(after.error).toBeUndefined();
    expect(textOf(after.chunks)).toBe(textOf(reference.chunks));

    // What it held through the outage was acknowledged once NATS had the answers, what was queued was run: the
    // work queue empties (nothing left for a redelivery to run twice later).
    const connection = await connect({ servers: nats.url.replace('nats://', '') });
    try {
      const manager = await jetstreamManager(connection);
      await until(
        'the work queue to empty',
        async () => (await manager.streams.info(`microbatch_${QUEUE}`)).state.messages === 0,
      );
    } finally {
      await connection.close();
    }

    const logs = logsOf(worker);
    console.log(`[NATS restart] worker log:\n${logs.filter((line) => !line.includes('batch')).join('\n')}`);
    expect(worker.exitInfo()).toBeUndefined();
    expect(logs.filter((line) => line.includes('lost the queue (NATS)'))).toHaveLength(1);
    expect(worker.stderr()).not.toMatch(/unhandled|Error:/i);
    await replica.close();
  }, 180_000);
});
