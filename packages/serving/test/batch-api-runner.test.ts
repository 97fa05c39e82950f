// The Batch API's runner on a service whose batches wait for the test: batch lines are fed only while the server is
// idle but for them (an interactive request, queued behind them or running, preempts the lines running, which are
// fed again once it ended, one then more as they finish, and answered exactly once; none runs beside it), and a batch past its window ends
// `expired` with the lines it finished in the output and the others as `batch_expired` errors. Work is counted,
// never timed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBatcher } from '@microbatch/core';
import type { TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { waitFor } from '@microbatch/test-kit';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunningServer, TextCompletionService } from '../src/index.js';
import { startTextCompletionApp } from '../src/app/express/index.js';
import { FAKE_USAGE as usage, fakeTextService } from './fake-text-service.js';

/**
 * A service running at most `slots` requests at once, each until the test releases it or its signal aborts (as a
 * decode loop drops a cancelled row, freeing its slot); the prompts in call order.
 */
function heldService(slots: number) {
  const held: { prompt: string; release: () => void }[] = [];
  const calls: string[] = [];
  const generate = createBatcher(
    async (inputs: TextGenerationInput[], { signal }): Promise<TextGenerationOutput[]> => {
      const prompt = String(inputs[0]?.prompt);
      calls.push(prompt);
      await new Promise<void>((resolve, reject) => {
        const entry = { prompt, release: resolve };
        held.push(entry);
        signal.addEventListener(
          'abort',
          () => {
            held.splice(held.indexOf(entry), 1);
            reject(signal.reason as Error);
          },
          { once: true },
        );
      });
      return inputs.map(() => ({ text: `answer to ${prompt}`, finish_reason: 'length', usage }));
    },
    { name: 'generate', maxBatchSize: 1, maxConcurrentBatches: slots },
  );
  const service = fakeTextService(generate, { id: 'held', streamerSlots: slots });
  /** Releases the held request whose prompt is `prompt`. */
  const release = (prompt: string): void => {
    const index = held.findIndex((entry) => entry.prompt === prompt);
    if (index === -1) throw new Error(`${prompt} is not running`);
    const [entry] = held.splice(index, 1);
    entry?.release();
  };
  helds.push(held);
  return { service, held, calls, release, generate };
}

const servers: RunningServer[] = [];
const dirs: string[] = [];
const helds: { prompt: string; release: () => void }[][] = [];
afterEach(async () => {
  // Shutdown drains the requests running: let every held one (and any fed meanwhile) finish.
  const releasing = setInterval(() => {
    for (const held of helds) for (const entry of held.splice(0)) entry.release();
  }, 5);
  await Promise.all(servers.splice(0).map((server) => server.shutdown()));
  clearInterval(releasing);
  helds.length = 0;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function start(
  service: TextCompletionService,
  batchApi: { maxInFlight: number; now?: () => number; maxFiles?: number; maxActiveBatches?: number },
) {
  const dataDir = mkdtempSync(join(tmpdir(), 'microbatch-runner-test-'));
  dirs.push(dataDir);
  const server = await startTextCompletionApp(
    service,
    { port: 0, host: '127.0.0.1' },
    { batchApi: { dataDir, ...batchApi } },
  );
  servers.push(server);
  return server.url;
}

async function submit(url: string, count: number): Promise<string> {
  const text = Array.from({ length: count }, (_, index) =>
    JSON.stringify({
      custom_id: `b${index}`,
      method: 'POST',
      url: '/v1/completions',
      body: { prompt: `b${index}`, max_tokens: 1 },
    }),
  ).join('\n');
  const form = new FormData();
  form.append('file', new Blob([text]), 'in.jsonl');
  form.append('purpose', 'batch');
  const file = (await (await fetch(`${url}/v1/files`, { method: 'POST', body: form })).json()) as { id: string };
  const response = await fetch(`${url}/v1/batches`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/completions', completion_window: '24h' }),
  });
  if (response.status !== 200) {
    throw new Error(`${response.status} Retry-After ${response.headers.get('retry-after')}: ${await response.text()}`);
  }
  return ((await response.json()) as { id: string }).id;
}

const batchOf = async (url: string, id: string) => (await (await fetch(`${url}/v1/batches/${id}`)).json()) as any;

/** Lets the runner's feeding loop (5 ms polls) look at the batchers several times. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 60));

const postCompletion = (url: string, prompt: string) =>
  fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: 1 }),
  });

interface ResultLine {
  custom_id: string;
  response: { body: { choices: { text: string }[] } } | null;
  error: { code: string } | null;
}

const contentLines = async (url: string, fileId: string): Promise<ResultLine[]> =>
  (await (await fetch(`${url}/v1/files/${fileId}/content`)).text())
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ResultLine);

/** Releases the running lines one by one until batch `id` has ended (bounded: a hang fails the test). */
async function releaseUntilEnded(
  url: string,
  id: string,
  held: readonly { prompt: string }[],
  release: (prompt: string) => void,
): Promise<void> {
  for (let tries = 0; tries < 400; tries += 1) {
    const entry = held[0];
    if (entry !== undefined) release(entry.prompt);
    else if (['completed', 'failed', 'cancelled', 'expired'].includes((await batchOf(url, id)).status)) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`batch ${id} did not end`);
}

describe('batch API runner', () => {
  it('an interactive request queued behind the lines preempts them: it runs next and alone; they are fed again and answered once', async () => {
    const { service, held, calls, release } = heldService(2);
    const url = await start(service, { maxInFlight: 2 });
    const id = await submit(url, 6);
    await waitFor('two batch lines running', () => held.length === 2);
    await settle();
    expect(calls).toEqual(['b0', 'b1']);
    // Both slots are busy: the interactive request waits in the queue, until the lines yield theirs.
    const interactive = postCompletion(url, 'now');
    await waitFor('the interactive request running', () => held.some((entry) => entry.prompt === 'now'));
    await settle();
    expect(held.map((entry) => entry.prompt)).toEqual(['now']);
    expect(calls).toEqual(['b0', 'b1', 'now']);
    release('now');
    expect((await (await interactive).json()) as { choices: { text: string }[] }).toMatchObject({
      choices: [{ text: 'answer to now' }],
    });
    // Idle again: the preempted lines are fed first, one at first (slow start), then one more per line finished.
    await waitFor('a line again', () => held.length === 1);
    await settle();
    expect(held.map((entry) => entry.prompt)).toEqual(['b0']);
    release('b0');
    await waitFor('two lines again', () => held.length === 2);
    expect(calls.slice(3)).toEqual(['b0', 'b1', 'b2']);
    await releaseUntilEnded(url, id, held, release);
    const batch = await batchOf(url, id);
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toEqual({ total: 6, completed: 6, failed: 0 });
    expect(calls.filter((prompt) => prompt.startsWith('b'))).toHaveLength(8);
    // Each line answered once, with its own answer: a preempted run wrote nothing.
    const output = await contentLines(url, batch.output_file_id);
    expect(output.map((line) => line.custom_id).toSorted()).toEqual(['b0', 'b1', 'b2', 'b3', 'b4', 'b5']);
    expect(output.map((line) => String(line.response?.body.choices[0]?.text)).toSorted()).toEqual(
      ['b0', 'b1', 'b2', 'b3', 'b4', 'b5'].map((prompt) => `answer to ${prompt}`),
    );
  }, 30_000);

  it('an interactive request dispatched beside the lines preempts them, and none is fed while it runs', async () => {
    const { service, held, calls, release } = heldService(3);
    const url = await start(service, { maxInFlight: 2 });
    const id = await submit(url, 6);
    await waitFor('two batch lines running', () => held.length === 2);
    const interactive = postCompletion(url, 'now');
    await waitFor('the lines preempted', () => held.length === 1 && held[0]?.prompt === 'now');
    await settle();
    await settle();
    // Two slots free, but no line runs beside the interactive request.
    expect(held.map((entry) => entry.prompt)).toEqual(['now']);
    expect(calls).toEqual(['b0', 'b1', 'now']);
    release('now');
    await interactive;
    await waitFor('a line again', () => held.length === 1);
    release('b0');
    await waitFor('two lines again', () => held.length === 2);
    expect(calls.slice(3)).toEqual(['b0', 'b1', 'b2']);
    await releaseUntilEnded(url, id, held, release);
    const batch = await batchOf(url, id);
    expect(batch.request_counts).toEqual({ total: 6, completed: 6, failed: 0 });
    const output = await contentLines(url, batch.output_file_id);
    expect(output.map((line) => line.custom_id).toSorted()).toEqual(['b0', 'b1', 'b2', 'b3', 'b4', 'b5']);
  }, 30_000);

  it('ends expired past the window: finished lines in the output, the others as batch_expired errors', async () => {
    const { service, held, release } = heldService(1);
    let now = Date.UTC(2026, 0, 1);
    const url = await start(service, { maxInFlight: 1, now: () => now });
    const id = await submit(url, 4);
    await waitFor('a line running', () => held.length === 1);
    release('b0');
    await waitFor('the second line running', () => held[0]?.prompt === 'b1');
    now += 24 * 60 * 60 * 1000;
    release('b1');
    let batch = await batchOf(url, id);
    for (let tries = 0; batch.status !== 'expired' && tries < 200; tries += 1) {
      await settle();
      batch = await batchOf(url, id);
    }
    expect(batch.status).toBe('expired');
    expect(batch.expired_at).not.toBeNull();
    expect(batch.request_counts).toEqual({ total: 4, completed: 2, failed: 2 });
    const lines = (fileId: string) => contentLines(url, fileId);
    expect((await lines(batch.output_file_id)).map((line) => line.custom_id)).toEqual(['b0', 'b1']);
    const errors = await lines(batch.error_file_id);
    expect(errors.map((line) => [line.custom_id, line.error?.code])).toEqual([
      ['b2', 'batch_expired'],
      ['b3', 'batch_expired'],
    ]);
    expect(held).toEqual([]);
  }, 30_000);

  it('bounds what clients can pile up: files kept (400 past maxFiles), batches not done (503 + Retry-After)', async () => {
    const { service, held } = heldService(1);
    const url = await start(service, { maxInFlight: 1, maxFiles: 2, maxActiveBatches: 1 });
    await submit(url, 3);
    await waitFor('a line running', () => held.length === 1);
    // One batch not done yet: a second is refused, fast, with a retry hint.
    const second = await submit(url, 1).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(String(second)).toMatch(/^Error: 503 Retry-After 60: .*"code":"QUEUE_FULL"/);
    // submit() uploaded a second file before the refusal: two files kept, a third upload is refused.
    const form = new FormData();
    form.append('file', new Blob(['{}']), 'x.jsonl');
    form.append('purpose', 'batch');
    const third = await fetch(`${url}/v1/files`, { method: 'POST', body: form });
    expect(third.status).toBe(400);
    expect(((await third.json()) as { error: { param: string } }).error.param).toBe('file');
    const files = (await (await fetch(`${url}/v1/files`)).json()) as { data: unknown[] };
    expect(files.data).toHaveLength(2);
  }, 30_000);
});
