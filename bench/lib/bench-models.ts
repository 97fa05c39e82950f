// The Llama-shaped benchmark decoders of `pnpm bench:models`: the bundled model's tokenizer (vocabulary 2,048) and
// made-up weights at realistic sizes, written once into models/bench/ (gitignored, as all of models/).
import { fileURLToPath } from 'node:url';
import { writeLlamaModel } from '@microbatch/test-kit';
import type { LlamaLayout, LlamaShape, WrittenLlama } from '@microbatch/test-kit';
import { TEXT_MODEL_DIR } from './paths.js';

const common = { vocab: 2048, positions: 2048, seed: 27 } as const;

/**
 * The sizes, named by their parameter count. Head size 64 and grouped-query attention as in SmolLM2 / Qwen2.5 / Llama
 * (query heads per KV head: 3, 4, 3), MLP width about 3x hidden.
 */
export const BENCH_MODELS = {
  '10m': { ...common, hidden: 384, layers: 6, heads: 6, kvHeads: 2, intermediate: 1024 },
  '30m': { ...common, hidden: 512, layers: 10, heads: 8, kvHeads: 2, intermediate: 1536 },
  '100m': { ...common, hidden: 768, layers: 16, heads: 12, kvHeads: 4, intermediate: 2048 },
} as const satisfies Record<string, LlamaShape>;

export type BenchModelName = keyof typeof BENCH_MODELS;

export const BENCH_MODEL_NAMES = Object.keys(BENCH_MODELS) as BenchModelName[];

/**
 * The weight formats a bench model is written in (`pnpm bench:generation --dtype`): fp32 (`onnx/model.onnx`), q8
 * (`model_quantized.onnx`: int8 weights, DynamicQuantizeLinear + MatMulInteger) and q4 (`model_q4.onnx`: MatMulNBits,
 * 4-bit blocks of 32), each in a folder of its own so `dtype: 'auto'` and an explicit dtype load the same file.
 */
export const BENCH_DTYPES = ['fp32', 'q8', 'q4'] as const;

export type BenchDtype = (typeof BENCH_DTYPES)[number];

const DTYPE_LAYOUTS: Readonly<Record<BenchDtype, LlamaLayout>> = {
  fp32: {},
  q8: { quantize: 'q8' },
  q4: { quantize: 'q4' },
};

/** Where a size is written (in a dtype other than fp32: `llama-<size>-<dtype>`). */
export function benchModelDir(name: BenchModelName, dtype: BenchDtype = 'fp32'): string {
  const suffix = dtype === 'fp32' ? '' : `-${dtype}`;
  return fileURLToPath(new URL(`../../models/bench/llama-${name}${suffix}`, import.meta.url));
}

/** Writes a size (in a dtype) unless its folder already holds it (same shape, seed and layout: same bytes). */
export function ensureBenchModel(name: BenchModelName, dtype: BenchDtype = 'fp32'): Promise<WrittenLlama> {
  return writeLlamaModel(benchModelDir(name, dtype), BENCH_MODELS[name], TEXT_MODEL_DIR, DTYPE_LAYOUTS[dtype]);
}
