// The Batch API's runner on a service whose batches wait for the test: batch lines are fed only while there is room
// (an interactive request queued behind them is dispatched before any further line, and beside a running
// interactive request fewer lines run), and a batch past its window ends `expired` with the lines it finished in
// the output and the others as `batch_expired` errors. Work is counted, never timed.
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

/** A service running at most `slots` requests at once, each until the test releases it; the prompts in call order. */
function heldService(slots: number) {
  const held: { prompt: string; release: () => void }[] = [];
  const calls: string[] = [];
  const generate = createBatcher(
    async (inputs: TextGenerationInput[]): Promise<TextGenerationOutput[]> => {
      const prompt = String(inputs[0]?.prompt);
      calls.push(prompt);
      await new Promise<void>((resolve) => held.push({ prompt, release: resolve }));
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

describe('batch API runner', () => {
  it('feeds no line while an interactive request waits; the interactive one runs next, and alone beside fewer lines', async () => {
    const { service, held, calls, release } = heldService(2);
    const url = await start(service, { maxInFlight: 2 });
    const id = await submit(url, 6);
    await waitFor('two batch lines running', () => held.length === 2);
    await settle();
    expect(calls).toEqual(['b0', 'b1']);
    // Both slots are busy: the interactive request waits in the queue.
    const interactive = fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'now', max_tokens: 1 }),
    });
    await waitFor('the interactive request queued', () => service.generate.queueLength === 1);
    release('b0');
    await waitFor('a slot taken again', () => held.length === 2);
    await settle();
    // The freed slot went to the interactive request, not to the next line.
    expect(calls).toEqual(['b0', 'b1', 'now']);
    release('now');
    expect((await (await interactive).json()) as { choices: { text: string }[] }).toMatchObject({
      choices: [{ text: 'answer to now' }],
    });
    // Interactive traffic gone: the batch takes both slots again, and runs to the end.
    await waitFor('two lines again', () => held.length === 2);
    for (let done = 1; done < 6;) {
      await waitFor('a running line', () => held.length > 0);
      const entry = held[0];
      if (entry !== undefined) {
        release(entry.prompt);
        done += 1;
      }
    }
    let batch = await batchOf(url, id);
    for (let tries = 0; batch.status !== 'completed' && tries < 200; tries += 1) {
      await settle();
      batch = await batchOf(url, id);
    }
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toEqual({ total: 6, completed: 6, failed: 0 });
    expect(calls.filter((prompt) => prompt.startsWith('b')).toSorted()).toEqual(['b0', 'b1', 'b2', 'b3', 'b4', 'b5']);
  }, 30_000);

  it('beside a running interactive request, runs at most an eighth of maxInFlight (at least 1) though slots are free', async () => {
    const { service, held, calls, release } = heldService(3);
    const url = await start(service, { maxInFlight: 2 });
    await submit(url, 6);
    await waitFor('two batch lines running', () => held.length === 2);
    const interactive = fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'now', max_tokens: 1 }),
    });
    await waitFor('the interactive request running', () => held.some((entry) => entry.prompt === 'now'));
    release('b0');
    await settle();
    await settle();
    // One slot is free, but one line runs beside the interactive request.
    expect(held.map((entry) => entry.prompt).toSorted()).toEqual(['b1', 'now']);
    expect(calls).toEqual(['b0', 'b1', 'now']);
    release('now');
    await interactive;
    await waitFor('two lines again', () => held.length === 2);
    expect(calls.slice(3)).toEqual(['b2']);
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
    const lines = async (fileId: string) =>
      (await (await fetch(`${url}/v1/files/${fileId}/content`)).text())
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { custom_id: string; error: { code: string } | null });
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
