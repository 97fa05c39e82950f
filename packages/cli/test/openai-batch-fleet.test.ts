// OpenAI's Batch API across a fleet, as an operator runs it: a broker of the test's own, two web replicas
// (`microbatch serve --queue … --batch-api`) and one `microbatch worker`, driven with the official `openai` client.
// A file uploaded on one replica is a batch's input on the other; a batch created on one is read, listed, cancelled
// on the other; its lines run on the worker, each answer equal to the interactive endpoint's greedy one. Then the
// replicas and the worker are SIGKILLed mid-batch, one replica and the worker restarted: the batch, taken up once
// its lease lapses, completes with every custom_id exactly once across the output and error files. One suite, a
// driver per broker; every wait is for counted state (a hang guard), never a duration asserted.
import { bundledModelDir } from '@microbatch/serving';
import {
  type ChildHandle,
  type ServerProcess,
  pollUntil,
  startNatsServer,
  startProcess,
  startRedisServer,
  startServerProcess,
} from '@microbatch/test-kit';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { byText, comparable, contentLines, untilEnded as untilBatchEnded } from './helpers/openai-batch.js';
import { BIN, READY } from './helpers/serve-config.js';

// Two replicas and a worker on one broker: slower than one process.
const untilEnded = (openai: OpenAI, id: string): Promise<OpenAI.Batch> => untilBatchEnded(openai, id, 180_000);

const QUEUE = 'tinystories-656k';
const WORKER_READY = /"msg":"worker ready"/;

/** A broker the test starts on a free port and stops after. */
interface Broker {
  readonly url: string;
  stop(): Promise<void>;
}

/** The brokers the suite runs on: the same tests, the URL's scheme picking the storage. */
const DRIVERS: readonly { readonly name: string; readonly start: () => Promise<Broker> }[] = [
  { name: 'Redis', start: startRedisServer },
  { name: 'NATS', start: startNatsServer },
];

const replicaOf = (url: string): Promise<ServerProcess> =>
  startServerProcess({
    args: [
      BIN,
      'serve',
      '--queue',
      url,
      '--model',
      QUEUE,
      '--batch-api',
      '--batch-max-in-flight',
      '2',
      '--port',
      '0',
      '--log-format',
      'json',
    ],
    ready: READY,
  });

async function workerOf(url: string): Promise<ChildHandle> {
  const worker = startProcess({ args: [BIN, 'worker', '--queue', url, '--model', bundledModelDir()] });
  await worker.waitForOutput(WORKER_READY, 90_000);
  return worker;
}

const client = (server: ServerProcess): OpenAI =>
  new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });

const line = (id: string, prompt: string, maxTokens: number) => ({
  custom_id: id,
  method: 'POST',
  url: '/v1/completions',
  body: { model: QUEUE, prompt, max_tokens: maxTokens, temperature: 0 },
});

async function upload(openai: OpenAI, lines: readonly unknown[]): Promise<OpenAI.FileObject> {
  const text = lines.map((value) => JSON.stringify(value)).join('\n');
  return openai.files.create({ file: await toFile(Buffer.from(text), 'input.jsonl'), purpose: 'batch' });
}

describe.each(DRIVERS)('the Batch API on two replicas and a worker over $name', ({ start }) => {
  let broker: Broker;
  let replicas: ServerProcess[] = [];
  let worker: ChildHandle | undefined;

  beforeAll(async () => {
    broker = await start();
    replicas = await Promise.all([replicaOf(broker.url), replicaOf(broker.url)]);
    worker = await workerOf(broker.url);
  }, 180_000);

  afterAll(async () => {
    await Promise.allSettled([...replicas.map((replica) => replica.stop()), worker?.stop()]);
    await broker?.stop();
  });

  it('files on one replica, batches on the other: each answer the interactive greedy one; list and cancel anywhere', async () => {
    const [one, two] = replicas.map(client) as [OpenAI, OpenAI];
    const lines = Array.from({ length: 12 }, (_, index) => line(`q-${index}`, `Once upon a time ${index}`, 8));
    const input = await upload(one, lines);
    const batch = await two.batches.create({
      input_file_id: input.id,
      endpoint: '/v1/completions',
      completion_window: '24h',
      metadata: { job: 'fleet' },
    });
    const done = await untilEnded(one, batch.id);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: 12, completed: 12, failed: 0 });
    const output = await contentLines(one, done.output_file_id);
    expect(output.map((entry) => String(entry.custom_id)).sort(byText)).toEqual(
      lines.map((entry) => entry.custom_id).sort(byText),
    );
    for (const entry of output) {
      const request = lines.find((candidate) => candidate.custom_id === entry.custom_id);
      const interactive = await one.completions.create(request?.body as OpenAI.CompletionCreateParamsNonStreaming);
      const response = entry.response as { status_code: number; body: unknown };
      expect(response.status_code).toBe(200);
      expect(comparable(response.body)).toEqual(comparable(interactive));
    }

    // A batch created on one replica and cancelled on the other (which does not run it): it ends cancelled.
    const long = Array.from({ length: 60 }, (_, index) => line(`l-${index}`, `The dragon ${index}`, 48));
    const longInput = await upload(two, long);
    const running = await one.batches.create({
      input_file_id: longInput.id,
      endpoint: '/v1/completions',
      completion_window: '24h',
    });
    const cancelling = await two.batches.cancel(running.id);
    expect(['cancelling', 'cancelled']).toContain(cancelling.status);
    const cancelled = await untilEnded(two, running.id);
    expect(cancelled.status).toBe('cancelled');
    const partial = await contentLines(two, cancelled.output_file_id);
    expect(new Set(partial.map((entry) => entry.custom_id)).size).toBe(partial.length);
    expect(cancelled.request_counts?.completed).toBe(partial.length);
    expect(partial.length).toBeLessThan(long.length);

    // Both replicas list both batches, newest first.
    for (const openai of [one, two]) {
      const page = await openai.batches.list({ limit: 10 });
      expect(page.data.map((b) => b.id)).toEqual([running.id, batch.id]);
    }
  }, 300_000);

  it('survives SIGKILL of both replicas and the worker mid-batch: every custom_id exactly once after a restart', async () => {
    const total = 40;
    const lines: unknown[] = Array.from({ length: total }, (_, index) => line(`k-${index}`, `Tale ${index}`, 24));
    // A few bad bodies, so the error file takes part too.
    for (let index = 0; index < total; index += 10) {
      lines[index] = { custom_id: `k-${index}`, method: 'POST', url: '/v1/completions', body: { prompt: [] } };
    }
    const [one] = replicas.map(client) as [OpenAI];
    const input = await upload(one, lines);
    const batch = await one.batches.create({
      input_file_id: input.id,
      endpoint: '/v1/completions',
      completion_window: '24h',
    });
    const { ok, value } = await pollUntil(
      () => one.batches.retrieve(batch.id),
      (b) => (b.request_counts?.completed ?? 0) >= 5,
      120_000,
      20,
    );
    expect(ok).toBe(true);
    const killed = [...replicas, ...(worker === undefined ? [] : [worker])];
    for (const child of killed) child.child.kill('SIGKILL');
    await Promise.all(killed.map((child) => child.exited));
    // Killed mid-batch: its last record is short of the whole file.
    expect(value.status).toBe('in_progress');
    expect((value.request_counts?.completed ?? 0) + (value.request_counts?.failed ?? 0)).toBeLessThan(total);

    replicas = [await replicaOf(broker.url)];
    worker = await workerOf(broker.url);
    const openai = client(replicas[0] as ServerProcess);
    const done = await untilEnded(openai, batch.id);
    expect(done.status).toBe('completed');
    const output = await contentLines(openai, done.output_file_id);
    const errors = await contentLines(openai, done.error_file_id);
    const ids = [...output, ...errors].map((entry) => String(entry.custom_id));
    expect(ids.length).toBe(total);
    expect(new Set(ids).size).toBe(total);
    expect(errors.length).toBe(total / 10);
    expect(done.request_counts).toEqual({ total, completed: total - total / 10, failed: total / 10 });
  }, 360_000);
});
