// The Llama-shaped benchmark decoders of `pnpm bench:models`: the bundled model's tokenizer (vocabulary 2,048) and
// made-up weights at realistic sizes, written once into models/bench/ (gitignored, as all of models/).
import { fileURLToPath } from 'node:url';
import { writeLlamaModel } from '@microbatch/test-kit';
import type { LlamaShape, WrittenLlama } from '@microbatch/test-kit';
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

/** Where a size is written. */
export function benchModelDir(name: BenchModelName): string {
  return fileURLToPath(new URL(`../../models/bench/llama-${name}`, import.meta.url));
}

/** Writes a size unless its folder already holds it (same shape and seed: same bytes). */
export function ensureBenchModel(name: BenchModelName): Promise<WrittenLlama> {
  return writeLlamaModel(benchModelDir(name), BENCH_MODELS[name], TEXT_MODEL_DIR);
}
