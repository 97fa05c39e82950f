// The compatibility matrix: generated models that reproduce each export layout people download (file names,
// input and output names and dtypes, config.json), each loaded by microbatch and by transformers.js's own
// `pipeline(task, dir, { dtype })` on the same folder, which must agree: the same greedy text (decoders, under
// both schedulings) or the same embeddings within 1e-4 (encoders). packages/inference/README.md lists the rows.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { MODEL_DTYPE_SUFFIXES, createWorkerPool } from '@microbatch/inference';
import type { ModelDtype, TextGenerationInput } from '@microbatch/inference';
import { writeLlamaModel } from '@microbatch/test-kit';
import type { LlamaLayout, LlamaShape } from '@microbatch/test-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPAT_NEW_TOKENS, COMPAT_PROMPTS, COMPAT_SHAPE, COMPAT_TEXTS } from './helpers/compat-fixture.js';
import { writeBertEncoder } from './helpers/bert-encoder.js';
import { GPT2_TOKENIZER_DIR, TINYSTORIES_DIR } from './helpers/paths.js';
import {
  type Greedy,
  seamless,
  transformersClassification,
  transformersEmbeddings,
  transformersGreedy,
} from './helpers/transformers-reference.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

const SHAPE = COMPAT_SHAPE;
const PROMPTS = COMPAT_PROMPTS;
const MAX_NEW_TOKENS = COMPAT_NEW_TOKENS;
const TEXTS = COMPAT_TEXTS;

let root: string;

beforeAll(async () => {
  await ensureWorkerBuilt();
  root = await mkdtemp(join(tmpdir(), 'microbatch-compat-'));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const inputs = (extra: Partial<TextGenerationInput>): TextGenerationInput[] =>
  PROMPTS.map((prompt) => ({ prompt, max_new_tokens: MAX_NEW_TOKENS, temperature: 0, ...extra }));

/**
 * What a microbatch pool generates for the prompts: text (either scheduling), ids (continuous). Batched together, or
 * with `alone` one prompt per call, as transformers.js runs them.
 */
async function microbatchGreedy(
  dir: string,
  dtype: 'auto' | ModelDtype,
  scheduling: 'continuous' | 'request',
  alone = false,
): Promise<Greedy[]> {
  const pool = createWorkerPool({ runner: { task: 'text-generation', model: dir, dtype, scheduling } });
  const batches = <T>(all: readonly T[]): T[][] => (alone ? all.map((one) => [one]) : [[...all]]);
  try {
    const results = [];
    for (const batch of batches(inputs({}))) results.push(...(await pool.run(batch)));
    const texts = results.map((result) => {
      if (result instanceof Error) throw result;
      expect(result.usage.completion_tokens).toBe(MAX_NEW_TOKENS);
      return result.text;
    });
    if (scheduling === 'request') return texts.map((text) => ({ tokens: [], text }));
    // A stream with `resume_tokens` carries each chunk's token ids.
    const tokens: number[][] = [];
    for (const batch of batches(inputs({ resume_tokens: [] }))) {
      const ids: number[][] = batch.map(() => []);
      for await (const step of pool.stream(batch)) {
        step.forEach((slot, index) => {
          if (slot instanceof Error) throw slot;
          if (typeof slot === 'object' && slot !== null && 'text' in slot) ids[index]?.push(...(slot.tokens ?? []));
        });
      }
      tokens.push(...ids);
    }
    return texts.map((text, index) => ({ tokens: tokens[index] ?? [], text }));
  } finally {
    await pool.close();
  }
}

describe('decoders: the same greedy text as transformers.js', () => {
  const rows: readonly {
    readonly row: string;
    readonly layout: LlamaLayout;
    readonly shape?: LlamaShape;
    readonly dtype: ModelDtype;
    readonly graph: string;
    /** The tokenizer folder the model is built on. @default TINYSTORIES_DIR (2,048 tokens) */
    readonly tokenizer?: string;
  }[] = [
    { row: 'Llama fp32 (onnx/model.onnx)', layout: {}, dtype: 'fp32', graph: 'model' },
    {
      row: 'Llama fp32, external data (onnx/model.onnx + model.onnx_data)',
      layout: { externalData: true },
      dtype: 'fp32',
      graph: 'model',
    },
    {
      row: 'Llama q8 (onnx/model_quantized.onnx: DynamicQuantizeLinear + MatMulInteger)',
      layout: { quantize: 'q8' },
      dtype: 'q8',
      graph: 'model',
    },
    {
      row: 'Llama q4 (onnx/model_q4.onnx: MatMulNBits, 4-bit blocks of 32)',
      layout: { quantize: 'q4' },
      dtype: 'q4',
      graph: 'model',
    },
    {
      row: 'merged decoder (onnx/decoder_model_merged.onnx, use_cache_branch, no position_ids)',
      layout: { graph: 'decoder_model_merged', useCacheBranch: true, positionIds: false },
      dtype: 'fp32',
      graph: 'decoder_model_merged',
    },
    {
      row: 'GPT-2 layout (decoder_model_merged.onnx, use_cache_branch, config n_head / n_embd / n_layer)',
      layout: { graph: 'decoder_model_merged', useCacheBranch: true, config: 'gpt2' },
      shape: { ...SHAPE, kvHeads: SHAPE.heads },
      dtype: 'fp32',
      graph: 'decoder_model_merged',
    },
    {
      row: 'Gemma config: head_dim (32) != hidden / heads (16), one KV head (multi-query)',
      layout: { config: 'gemma' },
      shape: { ...SHAPE, headDim: 32, kvHeads: 1 },
      dtype: 'fp32',
      graph: 'model',
    },
    {
      row: 'float16 KV cache and logits (onnx/model_fp16.onnx)',
      layout: { kvDtype: 'float16' },
      dtype: 'fp16',
      graph: 'model',
    },
    {
      row: 'Llama fp16 (onnx/model_fp16.onnx: float16 weights, KV cache and logits)',
      layout: { weights: 'float16', kvDtype: 'float16' },
      dtype: 'fp16',
      graph: 'model',
    },
    {
      row: 'Llama q4f16 (onnx/model_q4f16.onnx: MatMulNBits, float16 KV cache and logits)',
      layout: { quantize: 'q4', kvDtype: 'float16' },
      dtype: 'q4f16',
      graph: 'model',
    },
    {
      row: 'Llama int8 (onnx/model_int8.onnx: DynamicQuantizeLinear + MatMulInteger, int8 weights)',
      layout: { quantize: 'int8' },
      dtype: 'int8',
      graph: 'model',
    },
    {
      row: 'Llama uint8 (onnx/model_uint8.onnx: DynamicQuantizeLinear + MatMulInteger, uint8 weights, zero point)',
      layout: { quantize: 'uint8' },
      dtype: 'uint8',
      graph: 'model',
    },
    {
      row: 'Llama bnb4 (onnx/model_bnb4.onnx: MatMulBnb4, NF4 blocks of 64)',
      layout: { quantize: 'bnb4' },
      dtype: 'bnb4',
      graph: 'model',
    },
    {
      row: 'GPT-2 merged decoder on the real 50,257-token GPT-2 tokenizer (Xenova/gpt2 layout)',
      layout: { graph: 'decoder_model_merged', useCacheBranch: true, config: 'gpt2' },
      shape: { ...SHAPE, hidden: 32, heads: 2, kvHeads: 2, intermediate: 64, vocab: 50_257, positions: 1024 },
      dtype: 'fp32',
      graph: 'decoder_model_merged',
      tokenizer: GPT2_TOKENIZER_DIR,
    },
  ];

  it.each(rows.map((row, index) => ({ ...row, index })))(
    '$row',
    async ({ layout, shape, dtype, graph, index, tokenizer }) => {
      const dir = join(root, `llama-${index}`);
      await writeLlamaModel(dir, shape ?? SHAPE, tokenizer ?? TINYSTORIES_DIR, layout);
      expect(dirname(dir)).toBe(root);
      // The one graph of the row, under the dtype's name (a quantized one with its integer matmuls).
      const file = join(dir, 'onnx', `${graph}${MODEL_DTYPE_SUFFIXES[dtype]}.onnx`);
      const bytes = await readFile(file);
      expect([bytes.includes('MatMulInteger'), bytes.includes('MatMulNBits'), bytes.includes('MatMulBnb4')]).toEqual([
        dtype === 'q8' || dtype === 'int8' || dtype === 'uint8',
        dtype === 'q4' || dtype === 'q4f16',
        dtype === 'bnb4',
      ]);
      const expected = await transformersGreedy(dir, dtype, graph, PROMPTS, MAX_NEW_TOKENS);
      expect(expected.every(({ tokens }) => tokens.length === MAX_NEW_TOKENS)).toBe(true);
      // 'auto' finds the row's one file, as an explicit dtype does.
      // DynamicQuantizeLinear picks one scale for its whole input tensor, so rows sharing a decode call move each
      // other's logits; transformers.js runs each prompt alone, so these rows are compared one sequence at a time.
      const alone = dtype === 'q8' || dtype === 'int8' || dtype === 'uint8';
      const continuous = await microbatchGreedy(dir, 'auto', 'continuous', alone);
      expect(continuous.map(({ tokens }) => tokens)).toEqual(expected.map(({ tokens }) => tokens));
      expect(continuous.map(({ text }) => seamless(text))).toEqual(expected.map(({ text }) => seamless(text)));
      const request = await microbatchGreedy(dir, dtype, 'request', alone);
      expect(request.map(({ text }) => seamless(text))).toEqual(expected.map(({ text }) => seamless(text)));
    },
  );
});

describe('encoders: the same embeddings as transformers.js, within 1e-4', () => {
  it.each<{ row: string; tokenTypeIds: boolean; dtype: ModelDtype }>([
    { row: 'BERT with token_type_ids', tokenTypeIds: true, dtype: 'fp32' },
    { row: 'BERT without token_type_ids', tokenTypeIds: false, dtype: 'fp32' },
    {
      row: 'BERT q8 (onnx/model_quantized.onnx only: DynamicQuantizeLinear + MatMulInteger)',
      tokenTypeIds: true,
      dtype: 'q8',
    },
  ])('$row', async ({ tokenTypeIds, dtype }) => {
    const dir = await writeBertEncoder(join(root, `bert-${tokenTypeIds}-${dtype}`), {
      hidden: 16,
      tokenTypeIds,
      ...(dtype === 'q8' ? { quantize: 'q8' } : {}),
    });
    const file = join(dir, 'onnx', `model${MODEL_DTYPE_SUFFIXES[dtype]}.onnx`);
    expect((await readFile(file)).includes('MatMulInteger')).toBe(dtype === 'q8');
    const expected = await transformersEmbeddings(dir, dtype, TEXTS);
    // 'auto' finds the folder's one file.
    const pool = createWorkerPool({ runner: { task: 'feature-extraction', model: dir, dtype: 'auto' } });
    try {
      const results = await pool.run(TEXTS);
      results.forEach((vector, index) => {
        if (vector instanceof Error) throw vector;
        const want = expected[index] as number[];
        expect(vector).toHaveLength(want.length);
        const worst = Math.max(...vector.map((value, k) => Math.abs(value - (want[k] as number))));
        expect(worst).toBeLessThan(1e-4);
      });
    } finally {
      await pool.close();
    }
  });
});

describe('text classification: the same labels and scores as transformers.js, within 1e-4', () => {
  const LABELS = ['NEGATIVE', 'NEUTRAL', 'POSITIVE'];
  it.each<{ row: string; dtype: ModelDtype }>([
    { row: 'BERT sequence classification (id2label, logits)', dtype: 'fp32' },
    { row: 'BERT sequence classification q8 (onnx/model_quantized.onnx)', dtype: 'q8' },
  ])('$row', async ({ dtype }) => {
    const dir = await writeBertEncoder(join(root, `bert-classifier-${dtype}`), {
      hidden: 16,
      labels: LABELS,
      ...(dtype === 'q8' ? { quantize: 'q8' } : {}),
    });
    const expected = await transformersClassification(dir, dtype, TEXTS, LABELS.length);
    // The texts do not all land on one label, so the labels' order is tested, not only their names.
    expect(new Set(expected.map((labels) => labels[0]?.label)).size).toBeGreaterThan(1);
    const pool = createWorkerPool({
      runner: { task: 'text-classification', model: dir, dtype: 'auto', topK: LABELS.length },
    });
    try {
      const results = await pool.run(TEXTS);
      results.forEach((labels, index) => {
        if (labels instanceof Error) throw labels;
        const want = expected[index] ?? [];
        expect(labels.map(({ label }) => label)).toEqual(want.map(({ label }) => label));
        labels.forEach(({ score }, k) => expect(Math.abs(score - (want[k]?.score ?? Number.NaN))).toBeLessThan(1e-4));
      });
    } finally {
      await pool.close();
    }
  });
});
