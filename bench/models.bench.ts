// `pnpm bench:models`: writes the Llama-shaped benchmark decoders (bench/lib/bench-models.ts) into models/bench/
// unless they are there, then checks that each one loads and generates through @microbatch/inference (greedy, twice:
// the same tokens) and times its ONNX session alone at 1 intra-op thread: a 128-token prefill, and a decode step
// at batch 1 and 32 over 128 past tokens. `--size 30m` (or `--size 10m,30m`) limits it to some sizes; `--dtype
// fp32,q8,q4` writes and times each size in those weight formats too (default fp32; `pnpm bench:generation --dtype`
// compares them under load). It also writes the MiniLM-L6-shaped embedder and cross-encoder
// (bench/lib/minilm-model.ts) that `bench:embeddings` and `bench:rerank` use, and times a batch of 64 short inputs on
// each.
import { writeFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { parseArgs } from 'node:util';
import { createWorkerPool } from '@microbatch/inference';
import { BENCH_DTYPES, BENCH_MODEL_NAMES, benchModelDir, ensureBenchModel } from './lib/bench-models.js';
import type { BenchDtype, BenchModelName } from './lib/bench-models.js';
import { machineInfo } from './lib/machine.js';
import { ensureMiniLm } from './lib/minilm-model.js';
import { REPO_ROOT, RESULTS_DIR } from './lib/paths.js';
import { stepTimer } from './lib/step-timer.js';

const { values } = parseArgs({ options: { size: { type: 'string' }, dtype: { type: 'string' } } });
const sizes = (values.size ?? BENCH_MODEL_NAMES.join(',')).split(',') as BenchModelName[];
for (const size of sizes) {
  if (!BENCH_MODEL_NAMES.includes(size)) {
    throw new TypeError(`Expected \`--size\` to be among ${BENCH_MODEL_NAMES.join(', ')}, got \`${size}\``);
  }
}

const dtypes = (values.dtype ?? 'fp32').split(',') as BenchDtype[];
for (const dtype of dtypes) {
  if (!BENCH_DTYPES.includes(dtype)) {
    throw new TypeError(`Expected \`--dtype\` to be among ${BENCH_DTYPES.join(', ')}, got \`${dtype}\``);
  }
}

const PROMPT = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park.';
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/** Loads a model in a worker as `microbatch serve` does and generates greedily; returns the text and its tokens. */
async function generate(dir: string): Promise<{ text: string; tokens: number; loadMs: number }> {
  const started = performance.now();
  const pool = createWorkerPool({ runner: { task: 'text-generation', model: dir, scheduling: 'continuous' } });
  try {
    await pool.ready;
    const loadMs = performance.now() - started;
    const input = { prompt: PROMPT, max_new_tokens: 16, temperature: 0 };
    const [first, second] = await Promise.all([pool.run([input]), pool.run([input])]);
    const a = first?.[0];
    const b = second?.[0];
    if (a instanceof Error || b instanceof Error || a === undefined || b === undefined) {
      const failure = [a, b].find((result) => result instanceof Error);
      throw new Error(`generation failed: ${failure instanceof Error ? failure.message : 'no result'}`);
    }
    if (a.text !== b.text) throw new Error(`greedy generation differed: ${JSON.stringify([a.text, b.text])}`);
    return { text: a.text, tokens: a.usage.completion_tokens, loadMs };
  } finally {
    await pool.close();
  }
}

const results: Record<string, unknown> = {};
const table: Record<string, Record<string, number | string>> = {};
for (const [size, dtype] of sizes.flatMap((size) => dtypes.map((dtype) => [size, dtype] as const))) {
  const started = performance.now();
  const written = await ensureBenchModel(size, dtype);
  const writeMs = performance.now() - started;
  const name = dtype === 'fp32' ? size : `${size}-${dtype}`;
  console.log(
    `${name}: ${written.written ? `written in ${round(writeMs / 1000, 1)} s` : 'already written'} -> ${benchModelDir(size, dtype)}`,
  );
  const sample = await generate(written.dir);
  console.log(`  greedy, twice the same: ${JSON.stringify(sample.text)} (${sample.tokens} tokens)`);
  const timer = await stepTimer(written.dir);
  const prefill128 = await timer.time(1, 128, 0);
  const decode1 = await timer.time(1, 1, 128);
  const decode32 = await timer.time(32, 1, 128);
  await timer.close();
  const row = {
    parameters_m: round(written.parameters / 1e6, 1),
    file_mb: round(written.bytes / 2 ** 20, 1),
    worker_load_s: round(sample.loadMs / 1000, 1),
    prefill_128_ms: round(prefill128, 1),
    prefill_ms_per_token: round(prefill128 / 128, 3),
    decode_b1_ms: round(decode1, 2),
    decode_b32_ms: round(decode32, 1),
    prefill_128_in_decode_steps_b32: round(prefill128 / decode32, 1),
  };
  results[name] = { dir: relative(REPO_ROOT, written.dir), ...row, sample: sample.text };
  table[name] = row;
}
for (const kind of ['embedder', 'cross-encoder'] as const) {
  const started = performance.now();
  const written = await ensureMiniLm(kind);
  const writeMs = performance.now() - started;
  console.log(
    `minilm-l6-${kind}: ${written.written ? `written in ${round(writeMs / 1000, 1)} s` : 'already written'} -> ${written.dir}`,
  );
  const pool = createWorkerPool({
    runner: {
      task: 'onnx',
      model: `${written.dir}/onnx/model.onnx`,
      outputs: [kind === 'embedder' ? 'last_hidden_state' : 'logits'],
    },
  });
  try {
    await pool.ready;
    const ids = [101, ...Array.from({ length: 30 }, (_, index) => 2000 + index), 102];
    const batch = Array.from({ length: 64 }, () => ({ input_ids: ids, token_type_ids: ids.map(() => 0) }));
    await pool.run(batch);
    const timed = performance.now();
    await pool.run(batch);
    const batchMs = performance.now() - timed;
    const row = {
      file_mb: round(written.bytes / 2 ** 20, 1),
      batch_64x32_tokens_ms: round(batchMs, 1),
      tokens_per_s: round((64 * 32) / (batchMs / 1000), 0),
    };
    results[`minilm-l6-${kind}`] = { dir: relative(REPO_ROOT, written.dir), ...row };
    table[`minilm-l6-${kind}`] = row;
  } finally {
    await pool.close();
  }
}
console.table(table);
await writeFile(
  `${RESULTS_DIR}models.json`,
  `${JSON.stringify({ machine: machineInfo(), note: '1 intra-op thread; decode steps over 128 past tokens', results }, null, 2)}\n`,
);
