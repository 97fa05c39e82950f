// `microbatch serve` loads the model file its `--dtype` picks, as transformers.js would: real processes over HTTP
// on generated models in the compatibility matrix's layouts (a q4-only Llama folder, a GPT-2 merged decoder on the
// real GPT-2 tokenizer, a merged decoder, a `model_quantized.onnx`-only encoder), answering as transformers.js's own `pipeline(task, dir, { dtype })` does on
// the same folder; and a dtype the folder has no file for fails the start, naming what it has, with exit code 1.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ModelDtype } from '@microbatch/inference';
import { loadChatTemplate } from '@microbatch/serving';
import {
  type LlamaLayout,
  type LlamaShape,
  type ServerProcess,
  startServerProcess,
  writeLlamaModel,
} from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  COMPAT_NEW_TOKENS,
  COMPAT_PROMPTS,
  COMPAT_SHAPE,
  COMPAT_TEXTS,
} from '../../inference/test/helpers/compat-fixture.js';
import { writeBertEncoder } from '../../inference/test/helpers/bert-encoder.js';
import { GPT2_TOKENIZER_DIR, TINYSTORIES_DIR } from '../../inference/test/helpers/paths.js';
import {
  seamless,
  transformersEmbeddings,
  transformersGreedy,
} from '../../inference/test/helpers/transformers-reference.js';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
/** The CLI's ready line, as pino writes it off a terminal. */
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const SHAPE = COMPAT_SHAPE;
const PROMPTS = COMPAT_PROMPTS;
const MAX_TOKENS = COMPAT_NEW_TOKENS;
const TEXTS = COMPAT_TEXTS;

let root: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'microbatch-serve-dtype-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

/** Runs `microbatch <args>` to completion (a start that fails exits on its own). */
function run(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr });
    });
  });
}

function serve(args: readonly string[]): Promise<ServerProcess> {
  return startServerProcess({
    args: [BIN, 'serve', '--port', '0', '--log-format', 'json', ...args],
    env: { ...process.env },
    ready: READY,
  });
}

async function post(server: ServerProcess, path: string, body: object): Promise<{ headers: Headers; json: any }> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  // The body beside the status, so a failure shows the server's error.
  expect({ status: response.status, body: text }).toMatchObject({ status: 200 });
  return { headers: response.headers, json: JSON.parse(text) };
}

describe.each<{
  row: string;
  layout: LlamaLayout;
  dtype: ModelDtype;
  graph: string;
  shape?: LlamaShape;
  tokenizer?: string;
}>([
  { row: 'a q4-only Llama folder (onnx/model_q4.onnx)', layout: { quantize: 'q4' }, dtype: 'q4', graph: 'model' },
  {
    row: 'a GPT-2 merged decoder on the real 50,257-token GPT-2 tokenizer (Xenova/gpt2 layout)',
    layout: { graph: 'decoder_model_merged', useCacheBranch: true, config: 'gpt2' },
    dtype: 'fp32',
    graph: 'decoder_model_merged',
    shape: { ...COMPAT_SHAPE, hidden: 32, heads: 2, kvHeads: 2, intermediate: 64, vocab: 50_257, positions: 1024 },
    tokenizer: GPT2_TOKENIZER_DIR,
  },
  {
    row: 'a merged decoder (onnx/decoder_model_merged.onnx, use_cache_branch)',
    layout: { graph: 'decoder_model_merged', useCacheBranch: true, positionIds: false },
    dtype: 'fp32',
    graph: 'decoder_model_merged',
  },
])('microbatch serve --model <$row>', ({ layout, dtype, graph, shape, tokenizer }) => {
  let dir: string;
  let server: ServerProcess;
  let logged: string;
  beforeAll(async () => {
    dir = join(root, `llama-${graph}-${dtype}-${shape?.vocab ?? SHAPE.vocab}`);
    await writeLlamaModel(dir, shape ?? SHAPE, tokenizer ?? TINYSTORIES_DIR, layout);
    // `--dtype auto` (the default) finds the folder's one file; the explicit dtype is the other test's.
    server = await serve(['--model', dir, '--dtype', 'auto']);
    logged = server.output();
  }, 120_000);
  afterAll(() => server?.stop());

  it('serves under continuous scheduling, the loop answering', () => {
    expect(logged).toContain('"scheduling":"continuous"');
    expect(logged).toContain('"dtype":"auto"');
  });

  it('answers /v1/completions with the greedy text of transformers.js’s pipeline, concurrent requests alike', async () => {
    const expected = await transformersGreedy(dir, dtype, graph, PROMPTS, MAX_TOKENS);
    // Every reference generation runs its whole budget: the texts compared are never empty.
    expect(expected.map(({ tokens }) => tokens.length)).toEqual(PROMPTS.map(() => MAX_TOKENS));
    const answers = await Promise.all(
      PROMPTS.map((prompt) =>
        post(server, '/v1/completions', { model: 'm', prompt, max_tokens: MAX_TOKENS, temperature: 0 }),
      ),
    );
    for (const { headers } of answers) expect(headers.get('x-batch-id')).toMatch(/^w\d+-[^:]+:\d+$/); // a decode step
    expect(answers.map(({ json }) => seamless(json.choices[0].text as string))).toEqual(
      expected.map(({ text }) => seamless(text)),
    );
    expect(answers.map(({ json }) => json.usage.completion_tokens)).toEqual(
      expected.map(({ tokens }) => tokens.length),
    );
  });

  it('answers /v1/chat/completions with the pipeline’s greedy text for the prompt the chat template renders', async () => {
    const conversations = PROMPTS.map((content) => [{ role: 'user' as const, content }]);
    const template = loadChatTemplate(dir);
    const expected = await transformersGreedy(
      dir,
      dtype,
      graph,
      conversations.map((messages) => template.render(messages)),
      MAX_TOKENS,
    );
    expect(template.kind).toBe('plain'); // neither tokenizer has a chat template: `User: …\nAssistant:`
    expect(expected.map(({ tokens }) => tokens.length)).toEqual(PROMPTS.map(() => MAX_TOKENS));
    const answers = await Promise.all(
      conversations.map((messages) =>
        post(server, '/v1/chat/completions', { model: 'm', messages, max_tokens: MAX_TOKENS, temperature: 0 }),
      ),
    );
    expect(answers.map(({ json }) => seamless(json.choices[0].message.content as string))).toEqual(
      expected.map(({ text }) => seamless(text)),
    );
    expect(answers.map(({ json }) => json.usage.completion_tokens)).toEqual(PROMPTS.map(() => MAX_TOKENS));
  });

  it('refuses a dtype the folder has no file for, naming what it has, with exit code 1', async () => {
    const missing = dtype === 'q4' ? 'q8' : 'q4';
    const { code, stdout, stderr } = await run([
      'serve',
      '--model',
      dir,
      '--port',
      '0',
      '--log-format',
      'json',
      '--dtype',
      missing,
    ]);
    expect(code).toBe(1);
    const suffix = missing === 'q4' ? '_q4' : '_quantized';
    const has = `onnx/${graph}${dtype === 'q4' ? '_q4' : ''}.onnx`;
    expect(stderr).toContain(
      `dtype '${missing}' needs onnx/model${suffix}.onnx or onnx/decoder_model_merged${suffix}.onnx in ${dir}; ` +
        `it has ${dtype} (${has})`,
    );
    expect(stderr).not.toMatch(/\n\s+at /); // no stack trace
    // The worker thread found it missing: the server had started listening, and stopped.
    expect(stdout).toContain('"msg":"listening"');
    expect(stdout).not.toContain('"msg":"ready"');
  });
});

describe('microbatch serve --task feature-extraction --model <a model_quantized.onnx-only encoder>', () => {
  let dir: string;
  let server: ServerProcess;
  beforeAll(async () => {
    // A folder holding only `model_quantized.onnx`: int8 weights, each MatMul DynamicQuantizeLinear + MatMulInteger.
    dir = await writeBertEncoder(join(root, 'bert-q8'), { hidden: 16, quantize: 'q8' });
    expect((await readFile(join(dir, 'onnx', 'model_quantized.onnx'))).includes('MatMulInteger')).toBe(true);
    server = await serve(['--task', 'feature-extraction', '--model', dir]);
  }, 120_000);
  afterAll(() => server?.stop());

  it('answers /v1/embeddings as transformers.js’s pipeline with dtype q8 does, within 1e-4', async () => {
    // A dynamically quantized graph's activation scale is per tensor: its vectors depend on what shares the batch.
    // These texts fall in one of the server's length buckets (8 tokens), so the request is one model call over the
    // same padded tensor transformers.js's pipeline builds for them.
    const texts = [TEXTS[0] as string, 'The quick brown fox.', TEXTS[2] as string];
    const expected = await transformersEmbeddings(dir, 'q8', texts);
    const { json } = await post(server, '/v1/embeddings', { model: 'm', input: texts, encoding_format: 'float' });
    expect(json.data).toHaveLength(texts.length);
    json.data.forEach(({ embedding }: { embedding: number[] }, index: number) => {
      const want = expected[index] as number[];
      expect(embedding).toHaveLength(want.length);
      const worst = Math.max(...embedding.map((value, k) => Math.abs(value - (want[k] as number))));
      expect(worst).toBeLessThan(1e-4);
    });
  });

  it('refuses --dtype fp32, which the folder has no file for, naming what it has, with exit code 1', async () => {
    const { code, stdout, stderr } = await run([
      'serve',
      '--task',
      'feature-extraction',
      '--model',
      dir,
      '--port',
      '0',
      '--dtype',
      'fp32',
    ]);
    expect(code).toBe(1);
    expect(stderr).toContain(`dtype 'fp32' needs onnx/model.onnx in ${dir}; it has q8 (onnx/model_quantized.onnx)`);
    expect(stderr).not.toMatch(/\n\s+at /);
    expect(stdout).not.toContain('listening'); // refused before the server started
  });
});

it('refuses --dtype on a web replica, which loads no model, naming why, with exit code 1', async () => {
  const { code, stdout, stderr } = await run([
    'serve',
    '--queue',
    'redis://127.0.0.1:1',
    '--model',
    'tinystories-656k',
    '--dtype',
    'q4',
  ]);
  expect(code).toBe(1);
  expect(stderr).toContain('error: --dtype has no effect here: a web replica (--queue) runs no model, its workers do');
  expect(stdout).toBe('');
});
