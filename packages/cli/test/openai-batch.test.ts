// OpenAI's Files and Batch APIs with the official `openai` client against a real `microbatch serve --data-dir`:
// submit, poll, fetch, cancel and list; each output line's `response.body` is what the interactive endpoint answers
// greedily for the same body; hostile files get the documented errors; and a server killed (SIGKILL) mid-batch
// resumes on restart with every custom_id exactly once across the output and error files.
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundledModelDir } from '@microbatch/serving';
import { type ServerProcess, pollUntil, startServerProcess } from '@microbatch/test-kit';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { byText, comparable, contentLines, untilEnded } from './helpers/openai-batch.js';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const MODEL = bundledModelDir();
const dirs: string[] = [];

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'microbatch-batch-test-'));
  dirs.push(dir);
  return dir;
}

function serve(framework: string, dir: string, extra: readonly string[] = []): Promise<ServerProcess> {
  const args = [BIN, 'serve', '--model', MODEL, '--port', '0', '--framework', framework, '--log-format', 'json'];
  return startServerProcess({ args: [...args, '--data-dir', dir, ...extra], env: { ...process.env }, ready: READY });
}

const client = (server: ServerProcess): OpenAI =>
  new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });

interface Line {
  readonly custom_id: string;
  readonly method: string;
  readonly url: string;
  readonly body: Record<string, unknown>;
}

const completionLine = (id: string, prompt: string, maxTokens = 8): Line => ({
  custom_id: id,
  method: 'POST',
  url: '/v1/completions',
  body: { model: 'tinystories-656k', prompt, max_tokens: maxTokens, temperature: 0 },
});

const jsonl = (lines: readonly unknown[]): string => lines.map((line) => JSON.stringify(line)).join('\n');

async function upload(openai: OpenAI, text: string, name = 'input.jsonl'): Promise<OpenAI.FileObject> {
  return openai.files.create({ file: await toFile(Buffer.from(text), name), purpose: 'batch' });
}

/** The batch object as its record on disk says (read while no server runs). */
async function readBatchRecord(
  dir: string,
  id: string,
): Promise<OpenAI.Batch & { request_counts: OpenAI.BatchRequestCounts }> {
  const text = await readFile(join(dir, 'records', `${id}.json`), 'utf8');
  return (JSON.parse(text) as { batch: OpenAI.Batch & { request_counts: OpenAI.BatchRequestCounts } }).batch;
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('openai client: files and batches against microbatch serve --data-dir (express)', () => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    server = await serve('express', dataDir());
    openai = client(server);
  }, 120_000);
  afterAll(() => server?.stop());

  it('runs a batch to completed; each output body equals the interactive answer; bad bodies go to the error file', async () => {
    const prompts = ['Once upon a time', 'The cat sat', 'A little girl named Lily'];
    const lines: unknown[] = prompts.map((prompt, index) => completionLine(`line-${index}`, prompt));
    lines.push({ custom_id: 'bad-body', method: 'POST', url: '/v1/completions', body: { prompt: 5, max_tokens: 4 } });
    lines.push({
      custom_id: 'chat-in-completions',
      method: 'POST',
      url: '/v1/completions',
      body: { prompt: 'x', max_tokens: 4, stream: true },
    });
    const input = await upload(openai, jsonl(lines));
    expect(input).toMatchObject({ object: 'file', purpose: 'batch', filename: 'input.jsonl' });
    expect((await openai.files.retrieve(input.id)).bytes).toBe(Buffer.byteLength(jsonl(lines)));
    const created = await openai.batches.create({
      input_file_id: input.id,
      endpoint: '/v1/completions',
      completion_window: '24h',
      metadata: { job: 'nightly' },
    });
    expect(created).toMatchObject({ object: 'batch', status: 'validating', metadata: { job: 'nightly' } });
    const done = await untilEnded(openai, created.id);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: 5, completed: 3, failed: 2 });
    expect(done.completed_at).toBeGreaterThanOrEqual(done.created_at);
    const output = await contentLines(openai, done.output_file_id);
    expect(output.map((line) => String(line.custom_id)).toSorted(byText)).toEqual(['line-0', 'line-1', 'line-2']);
    for (const line of output) {
      const index = Number(String(line.custom_id).slice('line-'.length));
      const interactive = await openai.completions.create({
        model: 'tinystories-656k',
        prompt: prompts[index] ?? '',
        max_tokens: 8,
        temperature: 0,
      });
      const response = line.response as { status_code: number; body: unknown };
      expect(response.status_code).toBe(200);
      expect(comparable(response.body)).toEqual(comparable(interactive));
    }
    const errors = await contentLines(openai, done.error_file_id);
    const byId = new Map(errors.map((line) => [line.custom_id, line.response as { status_code: number; body: any }]));
    expect(byId.get('bad-body')?.status_code).toBe(400);
    expect(byId.get('bad-body')?.body.error.param).toBe('prompt');
    expect(byId.get('chat-in-completions')?.body.error.param).toBe('stream');
    const output2 = await openai.files.retrieve(done.output_file_id ?? '');
    expect(output2.purpose).toBe('batch_output');
  }, 180_000);

  it('lists batches newest first with after/limit, and files', async () => {
    const input = await upload(openai, jsonl([completionLine('one', 'Hi', 2)]));
    const first = await openai.batches.create({
      input_file_id: input.id,
      endpoint: '/v1/completions',
      completion_window: '24h',
    });
    const second = await openai.batches.create({
      input_file_id: input.id,
      endpoint: '/v1/completions',
      completion_window: '24h',
    });
    await untilEnded(openai, first.id);
    await untilEnded(openai, second.id);
    const page = await openai.batches.list({ limit: 1 });
    expect(page.data.map((b) => b.id)).toEqual([second.id]);
    expect(page.has_more).toBe(true);
    const next = await openai.batches.list({ limit: 1, after: second.id });
    expect(next.data.map((b) => b.id)).toEqual([first.id]);
    const files = await openai.files.list({ purpose: 'batch' });
    expect(files.data.map((f) => f.id)).toContain(input.id);
    const deleted = await openai.files.delete(input.id);
    expect(deleted).toMatchObject({ id: input.id, deleted: true });
    const gone = await openai.files.retrieve(input.id).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((gone as InstanceType<typeof OpenAI.APIError>).status).toBe(404);
  }, 120_000);

  it('cancel stops feeding: running lines finish, the batch ends cancelled with what was done', async () => {
    const lines = Array.from({ length: 200 }, (_, index) => completionLine(`c-${index}`, `Story ${index}`, 24));
    const input = await upload(openai, jsonl(lines));
    const batch = await openai.batches.create({
      input_file_id: input.id,
      endpoint: '/v1/completions',
      completion_window: '24h',
    });
    await pollUntil(
      () => openai.batches.retrieve(batch.id),
      (b) => b.status === 'in_progress',
      30_000,
      20,
    );
    const cancelling = await openai.batches.cancel(batch.id);
    expect(['cancelling', 'cancelled']).toContain(cancelling.status);
    const ended = await untilEnded(openai, batch.id);
    expect(ended.status).toBe('cancelled');
    expect(ended.cancelled_at).not.toBeNull();
    const output = await contentLines(openai, ended.output_file_id);
    const ids = output.map((line) => line.custom_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ended.request_counts?.completed).toBe(ids.length);
    expect(ids.length).toBeLessThan(200);
    const again = await openai.batches.cancel(batch.id).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((again as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
  }, 120_000);

  it('hostile files: each fails the batch with errors naming the line, or is refused with a 4xx', async () => {
    const failsWith = async (text: string, code: string, line: number | null) => {
      const input = await upload(openai, text);
      const batch = await openai.batches.create({
        input_file_id: input.id,
        endpoint: '/v1/completions',
        completion_window: '24h',
      });
      const ended = await untilEnded(openai, batch.id);
      expect(ended.status).toBe('failed');
      expect(ended.output_file_id).toBeNull();
      expect(ended.errors?.data?.[0]).toMatchObject({ code, line });
    };
    await failsWith('this is not json\n', 'invalid_json_line', 1);
    await failsWith(jsonl([completionLine('x', 'a'), completionLine('x', 'b')]), 'duplicate_custom_id', 2);
    await failsWith(
      jsonl([completionLine('x', 'a'), { ...completionLine('y', 'b'), url: '/v1/embeddings' }]),
      'invalid_url',
      2,
    );
    await failsWith(jsonl([{ ...completionLine('x', 'a'), method: 'GET' }]), 'invalid_method', 1);
    // A 10 MB line: past the 1 MiB line bound (uploaded whole: the upload bound is 100 MiB).
    const huge = JSON.stringify(completionLine('big', 'x'.repeat(10 * 1024 * 1024)));
    await failsWith(`${JSON.stringify(completionLine('ok', 'a'))}\n${huge}\n`, 'line_too_large', 2);
    // 50,001 lines: one over OpenAI's bound.
    const many = Array.from(
      { length: 50_001 },
      (_, index) => `{"custom_id":"${index}","method":"POST","url":"/v1/completions","body":{}}`,
    );
    await failsWith(many.join('\n'), 'too_many_requests', 50_001);

    const refused = async (request: Promise<unknown>) => {
      const error = await request.then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(OpenAI.APIError);
      return error as InstanceType<typeof OpenAI.APIError>;
    };
    const wrongPurpose = await refused(
      openai.files.create({ file: await toFile(Buffer.from('{}'), 'x.jsonl'), purpose: 'fine-tune' }),
    );
    expect([wrongPurpose.status, (wrongPurpose.error as { param?: unknown }).param]).toEqual([400, 'purpose']);
    // An output file (purpose batch_output) is not a batch's input.
    const input = await upload(openai, jsonl([completionLine('one', 'Hi', 2)]));
    const done = await untilEnded(
      openai,
      (await openai.batches.create({ input_file_id: input.id, endpoint: '/v1/completions', completion_window: '24h' }))
        .id,
    );
    const otherPurpose = await refused(
      openai.batches.create({
        input_file_id: done.output_file_id ?? '',
        endpoint: '/v1/completions',
        completion_window: '24h',
      }),
    );
    expect([otherPurpose.status, (otherPurpose.error as { param?: unknown }).param]).toEqual([400, 'input_file_id']);
    const window = await refused(
      openai.batches.create({ input_file_id: input.id, endpoint: '/v1/completions', completion_window: '1h' as '24h' }),
    );
    expect(window.status).toBe(400);
    const embeddings = await refused(
      openai.batches.create({ input_file_id: input.id, endpoint: '/v1/embeddings', completion_window: '24h' }),
    );
    expect([embeddings.status, (embeddings.error as { param?: unknown }).param]).toEqual([400, 'endpoint']);
    const missing = await refused(openai.batches.retrieve('batch_000000000000000000000000'));
    expect(missing.status).toBe(404);
    // Not multipart: 415 in OpenAI's shape.
    const plain = await fetch(`${server.url}/v1/files`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'x',
    });
    expect(plain.status).toBe(415);
    expect(((await plain.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    // A path with a parameter and another method: 405 with Allow, as exact paths.
    const put = await fetch(`${server.url}/v1/files/${input.id}`, { method: 'PUT' });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, DELETE');
  }, 300_000);
});

describe('microbatch serve --max-upload-mb', () => {
  it('refuses an upload past the bound with 413, keeping no part of it', async () => {
    const dir = dataDir();
    const server = await serve('express', dir, ['--max-upload-mb', '1']);
    try {
      const openai = client(server);
      const error = await upload(openai, 'x'.repeat(2 * 1024 * 1024)).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
      expect((await openai.files.list()).data).toEqual([]);
    } finally {
      await server.stop();
    }
  }, 120_000);
});

describe.each(['koa', 'fastify', 'hono', 'nest'])('openai client: a batch on %s', (framework) => {
  it('uploads, runs, fetches and lists', async () => {
    const server = await serve(framework, dataDir());
    try {
      const openai = client(server);
      const input = await upload(
        openai,
        jsonl([completionLine('a', 'Once upon a time'), completionLine('b', 'The dog')]),
      );
      const batch = await openai.batches.create({
        input_file_id: input.id,
        endpoint: '/v1/completions',
        completion_window: '24h',
      });
      const done = await untilEnded(openai, batch.id);
      expect(done.request_counts).toEqual({ total: 2, completed: 2, failed: 0 });
      const output = await contentLines(openai, done.output_file_id);
      expect(output.map((line) => String(line.custom_id)).toSorted(byText)).toEqual(['a', 'b']);
      expect((await openai.batches.list()).data.map((b) => b.id)).toEqual([batch.id]);
      const put = await fetch(`${server.url}/v1/batches/${batch.id}`, { method: 'PUT' });
      expect(put.status).toBe(405);
      // HEAD of a GET route with a parameter: its GET's status and headers, no body.
      const head = await fetch(`${server.url}/v1/files/${input.id}`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toContain('application/json');
      expect(await head.text()).toBe('');
    } finally {
      await server.stop();
    }
  }, 120_000);
});

describe('a batch survives SIGKILL of microbatch serve', () => {
  it('resumes on restart with every custom_id exactly once across the output and error files', async () => {
    const dir = dataDir();
    const total = 300;
    const lines: unknown[] = Array.from({ length: total }, (_, index) =>
      completionLine(`k-${index}`, `Tale ${index}`, 16),
    );
    // A few bad bodies, so the error file takes part too.
    for (let index = 0; index < total; index += 50) {
      lines[index] = { custom_id: `k-${index}`, method: 'POST', url: '/v1/completions', body: { prompt: [] } };
    }
    let server = await serve('express', dir);
    let openai = client(server);
    const input = await upload(openai, jsonl(lines));
    const batch = await openai.batches.create({
      input_file_id: input.id,
      endpoint: '/v1/completions',
      completion_window: '24h',
    });
    const { ok } = await pollUntil(
      () => openai.batches.retrieve(batch.id),
      (b) => (b.request_counts?.completed ?? 0) >= 20,
      60_000,
      20,
    );
    expect(ok).toBe(true);
    server.child.kill('SIGKILL');
    await server.exited;
    // Killed mid-batch: what the last record said is short of the whole file.
    const atKill = await readBatchRecord(dir, batch.id);
    expect(atKill.status).toBe('in_progress');
    expect(atKill.request_counts.completed + atKill.request_counts.failed).toBeLessThan(total);
    server = await serve('express', dir);
    try {
      openai = client(server);
      const done = await untilEnded(openai, batch.id, 240_000);
      expect(done.status).toBe('completed');
      const output = await contentLines(openai, done.output_file_id);
      const errors = await contentLines(openai, done.error_file_id);
      const ids = [...output, ...errors].map((line) => String(line.custom_id));
      expect(ids.length).toBe(total);
      expect(new Set(ids).size).toBe(total);
      expect(errors.length).toBe(total / 50);
      expect(done.request_counts).toEqual({ total, completed: total - total / 50, failed: total / 50 });
    } finally {
      await server.stop();
    }
  }, 360_000);
});
