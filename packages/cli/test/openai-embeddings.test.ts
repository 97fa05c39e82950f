// `microbatch serve --task feature-extraction` against the official `openai` client, with a BERT-shaped encoder
// generated here (the real MiniLM WordPiece tokenizer, small random weights). The reference embeddings come from
// transformers.js' own feature-extraction pipeline (the inference package's runner) on the same folder.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createWorkerPool, loadTokenizer } from '@microbatch/inference';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../inference/test/helpers/bert-encoder.js';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  'Hello',
  'Batching pads every input of a call to the longest one, and the mask keeps padding out of attention.',
  'Embeddings for retrieval',
  'a b c d e f g h i j k l m n o p',
  'Node.js',
];

let scratch: string;
let modelDir: string;
let reference: number[][];
let tokenCounts: number[];

function serve(framework: string, extra: readonly string[] = []): Promise<ServerProcess> {
  const args = [BIN, 'serve', '--task', 'feature-extraction', '--model', modelDir, '--port', '0'];
  return startServerProcess({
    args: [...args, '--framework', framework, '--log-format', 'json', ...extra],
    env: { ...process.env },
    ready: READY,
  });
}

function client(server: ServerProcess): OpenAI {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}

function expectClose(actual: readonly number[], expected: readonly number[]): void {
  expect(actual).toHaveLength(expected.length);
  const worst = Math.max(...actual.map((value, index) => Math.abs(value - (expected[index] as number))));
  expect(worst).toBeLessThan(1e-5);
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-embeddings-'));
  modelDir = await writeBertEncoder(join(scratch, 'tiny-minilm'), { hidden: 32 });
  const pool = createWorkerPool({
    runner: { task: 'feature-extraction', model: modelDir, pooling: 'mean', normalize: true },
  });
  try {
    // One text per call: no padding at all in the reference.
    reference = [];
    for (const text of TEXTS) reference.push((await pool.run([text]))[0] as number[]);
  } finally {
    await pool.close();
  }
  const tokenizer = await loadTokenizer(modelDir);
  tokenCounts = TEXTS.map((text) => tokenizer.encode(text).length);
}, 120_000);
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe('openai client: embeddings against microbatch serve --task feature-extraction', () => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    server = await serve('express', ['--max-batch-size', '16']);
    openai = client(server);
  }, 120_000);
  afterAll(() => server?.stop());

  it("embeds a batch of texts as transformers.js' pipeline does alone, in order, with the token usage", async () => {
    const answer = await openai.embeddings.create({ model: 'tiny-minilm', input: TEXTS, encoding_format: 'float' });
    expect(answer.object).toBe('list');
    expect(answer.model).toBe('tiny-minilm');
    expect(answer.data.map((item) => [item.object, item.index])).toEqual(TEXTS.map((_, index) => ['embedding', index]));
    answer.data.forEach((item, index) => expectClose(item.embedding, reference[index] as number[]));
    const total = tokenCounts.reduce((sum, count) => sum + count, 0);
    expect(answer.usage).toEqual({ prompt_tokens: total, total_tokens: total });
    // The six inputs went to the model in one padded call per length bucket (token counts rounded up to a multiple
    // of 8, the default `lengthBucket`), all sent together: the batch log's sizes are the buckets' sizes.
    const buckets = new Map<number, number>();
    for (const count of tokenCounts) buckets.set(Math.ceil(count / 8), (buckets.get(Math.ceil(count / 8)) ?? 0) + 1);
    const batches = server.jsonLines().filter((line) => (line as { msg?: string }).msg === 'batch') as {
      batchSize: number;
    }[];
    const bySize = (a: number, b: number): number => a - b;
    expect(batches.map((batch) => batch.batchSize).toSorted(bySize)).toEqual([...buckets.values()].toSorted(bySize));
  });

  it('decodes base64 (what the client asks for by default) to the same floats', async () => {
    const [float, base64] = await Promise.all([
      openai.embeddings.create({ model: 'm', input: TEXTS, encoding_format: 'float' }),
      openai.embeddings.create({ model: 'm', input: TEXTS }),
    ]);
    const raw = await fetch(`${server.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'Hello', encoding_format: 'base64' }),
    });
    const [item] = ((await raw.json()) as { data: { embedding: string }[] }).data;
    const bytes = Buffer.from(item?.embedding ?? '', 'base64');
    expect(bytes.length).toBe(32 * 4);
    expect(Array.from({ length: 32 }, (_, d) => bytes.readFloatLE(d * 4))).toEqual(float.data[1]?.embedding);
    base64.data.forEach((entry, index) => expect(entry.embedding).toEqual(float.data[index]?.embedding));
  });

  it('takes a string, token ids, and arrays of token ids', async () => {
    const tokenizer = await loadTokenizer(modelDir);
    const ids = tokenizer.encode(TEXTS[2] as string);
    const one = await openai.embeddings.create({ model: 'm', input: TEXTS[2] as string, encoding_format: 'float' });
    const fromIds = await openai.embeddings.create({ model: 'm', input: ids, encoding_format: 'float' });
    const many = await openai.embeddings.create({
      model: 'm',
      input: [ids, [101, 7592, 102]],
      encoding_format: 'float',
    });
    expectClose(one.data[0]?.embedding ?? [], reference[2] as number[]);
    expectClose(fromIds.data[0]?.embedding ?? [], reference[2] as number[]);
    expectClose(many.data[0]?.embedding ?? [], reference[2] as number[]);
    expectClose(many.data[1]?.embedding ?? [], reference[1] as number[]); // [CLS] hello [SEP]
    expect(many.usage.prompt_tokens).toBe(ids.length + 3);
  });

  it('lists the model it serves', async () => {
    const models = await openai.models.list();
    expect(models.data.map((model) => model.id)).toEqual(['tiny-minilm']);
  });

  it.each([
    [{ input: '' }, 'input', /`input` must not be empty/],
    [{ input: [] }, 'input', /`input` must be a non-empty string, .* got an array of 0/],
    [{ input: ['ok', 5] }, 'input[1]', /got `5` \(number\) at `input\[1\]`/],
    [{ input: [[101, 99_999]] }, 'input[0]', /token ids must be integers from 0 to 30521, got `99999` \(number\) at 1/],
    [{ input: 'word '.repeat(600) }, 'input', /^400 `input` is 602 tokens; this model reads at most 512$/],
    [{ input: 'x', encoding_format: 'hex' }, 'encoding_format', /must be "float" or "base64"/],
    [{ input: 'x', dimensions: 16 }, 'dimensions', /have 32 dimensions and cannot be shortened/],
    [{ input: 'x', dimensions: 64 }, 'dimensions', /must be an integer from 1 to 32/],
  ])('refuses a bad body (%#) with 400 naming the field', async (body, param, message) => {
    const error = await openai.embeddings.create({ model: 'm', ...body } as never).then(
      () => undefined,
      (caught: unknown) => caught as InstanceType<typeof OpenAI.APIError>,
    );
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect([error?.status, error?.param]).toEqual([400, param]);
    expect(error?.message).toMatch(message);
  });
});

describe('embeddings on Koa, Nest, Fastify and Hono, and the flags of --task feature-extraction', () => {
  it.each(['koa', 'nest', 'fastify', 'hono'])(
    '%s serves the same embeddings',
    async (framework) => {
      const server = await serve(framework, ['--pooling', 'mean', '--normalize', 'on']);
      try {
        const answer = await client(server).embeddings.create({ model: 'm', input: TEXTS });
        answer.data.forEach((item, index) => expectClose(item.embedding, reference[index] as number[]));
        const refused = await fetch(`${server.url}/v1/embeddings`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ input: [] }),
        });
        expect(refused.status).toBe(400);
        expect(((await refused.json()) as { error: { param: string } }).error.param).toBe('input');
      } finally {
        await server.stop();
      }
    },
    120_000,
  );

  it('refuses flags that do not apply to the task, naming them', async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        execFile(process.execPath, [BIN, 'serve', '--model', modelDir, ...args], (error, _stdout, stderr) =>
          resolve({ code: error === null ? 0 : (error.code as number), stderr }),
        );
      });
    const scheduling = await run(['--task', 'feature-extraction', '--scheduling', 'request']);
    expect(scheduling.code).toBe(1);
    expect(scheduling.stderr).toMatch(/^error: --scheduling does not apply to --task feature-extraction$/m);
    const pooling = await run(['--pooling', 'cls']);
    expect(pooling.code).toBe(1);
    expect(pooling.stderr).toMatch(/^error: --pooling does not apply to --task text-generation$/m);
  });
});
