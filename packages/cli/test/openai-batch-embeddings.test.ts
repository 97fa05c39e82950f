// `/v1/embeddings` batches with the official `openai` client against `microbatch serve --task feature-extraction
// --data-dir`: each output line's `response.body` is what the interactive endpoint answers for the same body (on a
// BERT-shaped encoder generated here), on Express and Nest (the Nest controller inherits the Batch API routes).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, pollUntil, startServerProcess } from '@microbatch/test-kit';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../inference/test/helpers/bert-encoder.js';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const TEXTS = ['The quick brown fox', 'Hello', 'Embeddings for retrieval'];

let scratch: string;
let modelDir: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-batch-embeddings-'));
  modelDir = await writeBertEncoder(join(scratch, 'tiny-minilm'), { hidden: 32 });
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe.each(['express', 'nest'])('openai client: an embeddings batch on %s', (framework) => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    const dataDir = await mkdtemp(join(scratch, 'data-'));
    server = await startServerProcess({
      args: [
        BIN,
        'serve',
        '--task',
        'feature-extraction',
        '--model',
        modelDir,
        '--port',
        '0',
        '--framework',
        framework,
        '--log-format',
        'json',
        '--data-dir',
        dataDir,
      ],
      env: { ...process.env },
      ready: READY,
    });
    openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(() => server?.stop());

  it('answers each line as the interactive endpoint does; a bad body goes to the error file', async () => {
    const lines: unknown[] = TEXTS.map((input, index) => ({
      custom_id: `e${index}`,
      method: 'POST',
      url: '/v1/embeddings',
      body: { model: 'tiny-minilm', input },
    }));
    lines.push({ custom_id: 'bad', method: 'POST', url: '/v1/embeddings', body: { input: 7 } });
    const text = lines.map((line) => JSON.stringify(line)).join('\n');
    const file = await openai.files.create({ file: await toFile(Buffer.from(text), 'in.jsonl'), purpose: 'batch' });
    const batch = await openai.batches.create({
      input_file_id: file.id,
      endpoint: '/v1/embeddings',
      completion_window: '24h',
    });
    const { value: done, ok } = await pollUntil(
      () => openai.batches.retrieve(batch.id),
      (b) => b.status === 'completed' || b.status === 'failed',
      60_000,
    );
    expect(ok).toBe(true);
    expect(done.status).toBe('completed');
    expect(done.request_counts).toEqual({ total: 4, completed: 3, failed: 1 });
    const read = async (id: string | null | undefined) =>
      (await (await openai.files.content(id ?? '')).text())
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { custom_id: string; response: { status_code: number; body: any } });
    for (const line of await read(done.output_file_id)) {
      const index = Number(line.custom_id.slice(1));
      const interactive = await openai.embeddings.create({
        model: 'tiny-minilm',
        input: TEXTS[index] ?? '',
        encoding_format: 'float',
      });
      expect(line.response.status_code).toBe(200);
      expect(line.response.body.data).toEqual(interactive.data);
      expect(line.response.body.usage).toEqual(interactive.usage);
    }
    const [bad] = await read(done.error_file_id);
    expect([bad?.custom_id, bad?.response.status_code, bad?.response.body.error.param]).toEqual(['bad', 400, 'input']);
    // A completions batch is not served here.
    const refused = await openai.batches
      .create({ input_file_id: file.id, endpoint: '/v1/completions', completion_window: '24h' })
      .then(
        () => undefined,
        (error: unknown) => error as InstanceType<typeof OpenAI.APIError>,
      );
    expect(refused?.status).toBe(400);
  }, 120_000);
});
