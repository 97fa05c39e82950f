// `pnpm bench:structured`: what structured outputs cost, in one run, on a generated ~29M-parameter Llama-shaped
// decoder with the real GPT-2 vocabulary (50,257 tokens; written once into models/bench/, gitignored):
// - tokens/s of generations with a JSON Schema vs unconstrained ones, at concurrency 1 and 32, through a worker
//   pool's continuous decode loop (the ratio is the figure; both measured here, in the same run);
// - the grammar mask's time per step (fill the next-token bitmask, apply it to the logits), p50 / p99, over random
//   walks through 10 schemas;
// - compile time of those 10 schemas cold and cached;
// - the inter-token gap p99 of 8 free-text streams alone, then while requests with never-seen schemas arrive (one
//   every 400 ms, each compiled cold in the worker between loop iterations).
// Writes bench/results/structured.json. The machine is shared: figures move with its load.
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { createWorkerPool } from '@microbatch/inference';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput, WorkerPool } from '@microbatch/inference';
import { writeLlamaModel } from '@microbatch/test-kit';
import { GrammarEngine, applyTokenMask } from '../packages/inference/src/grammar/grammar-engine.js';
import { readVocabulary } from '../packages/inference/src/grammar/vocabulary.js';
import { machineInfo } from './lib/machine.js';
import { RESULTS_DIR } from './lib/paths.js';
import { percentile, round } from './lib/stats.js';

const MODEL_DIR = fileURLToPath(new URL('../models/bench/gpt2-vocab-29m', import.meta.url));
const GPT2_TOKENIZER = fileURLToPath(new URL('../models/gpt2-tokenizer', import.meta.url));
const SHAPE = {
  hidden: 384,
  layers: 6,
  heads: 6,
  kvHeads: 2,
  intermediate: 1024,
  vocab: 50257,
  positions: 1024,
  seed: 27,
};
const EOS = 50256;
const NEW_TOKENS = 64;

/** Ten schemas of the shapes clients send. */
const SCHEMAS: readonly Record<string, unknown>[] = [
  {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 16 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
    required: ['name', 'age'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: { items: { type: 'array', items: { type: 'string', maxLength: 10 }, minItems: 4, maxItems: 8 } },
    required: ['items'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: { color: { enum: ['red', 'green', 'blue'] }, size: { enum: ['S', 'M', 'L', 'XL'] } },
    required: ['color', 'size'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: { code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{4}$' } },
    required: ['code'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      value: { anyOf: [{ type: 'integer', minimum: -50, maximum: 50 }, { type: 'boolean' }, { type: 'null' }] },
    },
    required: ['value'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      user: {
        type: 'object',
        properties: { id: { type: 'integer', minimum: 1, maximum: 1000 }, email: { type: 'string', maxLength: 24 } },
        required: ['id', 'email'],
        additionalProperties: false,
      },
    },
    required: ['user'],
    additionalProperties: false,
  },
  {
    type: 'array',
    items: {
      type: 'object',
      properties: { x: { type: 'number' }, y: { type: 'number' } },
      required: ['x', 'y'],
      additionalProperties: false,
    },
    minItems: 1,
    maxItems: 4,
  },
  {
    type: 'object',
    properties: {
      title: { type: 'string', maxLength: 30 },
      tags: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 5 },
      draft: { type: 'boolean' },
    },
    required: ['title', 'tags', 'draft'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: { status: { const: 'ok' }, note: { type: 'string', minLength: 4, maxLength: 20 } },
    required: ['status', 'note'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      steps: {
        type: 'array',
        items: {
          type: 'object',
          properties: { op: { enum: ['add', 'sub', 'mul'] }, n: { type: 'integer', minimum: 0, maximum: 99 } },
          required: ['op', 'n'],
          additionalProperties: false,
        },
        minItems: 2,
        maxItems: 6,
      },
    },
    required: ['steps'],
    additionalProperties: false,
  },
];

/** The throughput schema: long enough that most generations use their 64 tokens. */
const LONG_SCHEMA = {
  type: 'object',
  properties: { lines: { type: 'array', items: { type: 'string', maxLength: 40 }, minItems: 6, maxItems: 6 } },
  required: ['lines'],
  additionalProperties: false,
};

function input(index: number, grammar: TextGenerationInput['grammar']): TextGenerationInput {
  return {
    prompt: `Request ${index}: write the answer.`,
    max_new_tokens: NEW_TOKENS,
    temperature: 1,
    seed: index,
    ...(grammar === undefined ? {} : { grammar }),
  };
}

type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;

/** Tokens per second of `total` requests, `concurrency` at a time. */
async function throughput(pool: Pool, concurrency: number, total: number, structured: boolean): Promise<number> {
  const grammar = structured ? ({ type: 'json', schema: LONG_SCHEMA } as const) : undefined;
  let tokens = 0;
  let next = 0;
  const started = performance.now();
  const client = async () => {
    while (next < total) {
      const index = next++;
      const [result] = await pool.run([input(index, grammar)]);
      if (result instanceof Error || result === undefined) throw result ?? new Error('no result');
      tokens += result.usage.completion_tokens;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  return tokens / ((performance.now() - started) / 1000);
}

/** Inter-token gaps (ms) of 8 free-text streams; with `arrivals`, a request with a new schema every 400 ms (at most 16). */
async function streamGaps(pool: Pool, arrivals: boolean, salt: number): Promise<number[]> {
  const gaps: number[] = [];
  let streaming = true;
  const side: Promise<unknown>[] = [];
  const injector = (async () => {
    let count = 0;
    while (arrivals && streaming && count < 16) {
      await new Promise((resolve) => setTimeout(resolve, 400));
      if (!streaming) break;
      // A property name never seen: a cold compile in the worker.
      const schema = {
        type: 'object',
        properties: { [`field_${salt}_${count}`]: { type: 'string', maxLength: 8 } },
        required: [`field_${salt}_${count}`],
        additionalProperties: false,
      };
      count += 1;
      side.push(pool.run([{ ...input(10_000 + count, { type: 'json', schema }), max_new_tokens: 16 }]));
    }
  })();
  await Promise.all(
    Array.from({ length: 8 }, async (_, index) => {
      let last: number | undefined;
      for await (const slots of pool.stream([{ ...input(index, undefined), max_new_tokens: 96 }])) {
        const now = performance.now();
        if (slots.some((slot) => slot !== null && slot !== undefined)) {
          if (last !== undefined) gaps.push(now - last);
          last = now;
        }
      }
    }),
  );
  streaming = false;
  await injector;
  await Promise.all(side);
  return gaps.sort((a, b) => a - b);
}

/** Mask time per step over random walks through the schemas, and compile times cold and cached. */
async function engineFigures(): Promise<Record<string, number>> {
  const vocabulary = readVocabulary(GPT2_TOKENIZER);
  const createStarted = performance.now();
  const engine = await GrammarEngine.create({ vocabulary, vocabSize: 50257, stopTokenIds: [EOS] });
  const vocabularyMs = performance.now() - createStarted;
  const cold: number[] = [];
  const cached: number[] = [];
  const steps: number[] = [];
  const mask = new Int32Array(Math.ceil(50257 / 32));
  const logits = new Float32Array(50257);
  let state = 7;
  for (const schema of SCHEMAS) {
    let started = performance.now();
    const matcher = await engine.matcher({ type: 'json', schema });
    cold.push(performance.now() - started);
    started = performance.now();
    (await engine.matcher({ type: 'json', schema })).dispose();
    cached.push(performance.now() - started);
    for (let walk = 0; walk < 5; walk += 1) {
      matcher.reset();
      for (let step = 0; step < 64 && !matcher.isTerminated(); step += 1) {
        logits.fill(0);
        const stepStarted = performance.now();
        matcher.fillNextTokenBitmask(mask);
        applyTokenMask(logits, mask);
        steps.push(performance.now() - stepStarted);
        const allowed: number[] = [];
        for (let id = 0; id < 50257; id += 1) if (logits[id] === 0) allowed.push(id);
        state = (Math.imul(state, 1103515245) + 12345) >>> 0;
        const token = allowed.includes(EOS) && step > 24 ? EOS : (allowed[state % allowed.length] as number);
        matcher.acceptToken(token);
      }
    }
    matcher.dispose();
  }
  const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
  return {
    vocabularyMs: round(vocabularyMs, 1),
    maskStepP50Us: round(percentile(sorted(steps), 50) * 1000, 1),
    maskStepP99Us: round(percentile(sorted(steps), 99) * 1000, 1),
    maskSteps: steps.length,
    compileColdP50Ms: round(percentile(sorted(cold), 50), 2),
    compileColdMaxMs: round(Math.max(...cold), 2),
    compileCachedP50Ms: round(percentile(sorted(cached), 50), 3),
    compileCachedMaxMs: round(Math.max(...cached), 3),
  };
}

const written = await writeLlamaModel(MODEL_DIR, SHAPE, GPT2_TOKENIZER);
console.log(
  `model: ${MODEL_DIR} (${(written.parameters / 1e6).toFixed(1)}M parameters${written.written ? ', written now' : ''})`,
);
const engine = await engineFigures();
console.log('engine', engine);

const pool: Pool = createWorkerPool({
  runner: { task: 'text-generation', model: MODEL_DIR, scheduling: 'continuous', maxSequences: 32 },
  size: 1,
});
await pool.ready;
try {
  // Warm-up: the worker's grammar engine (vocabulary) and the throughput schema's compile happen here.
  await throughput(pool, 4, 8, true);
  await throughput(pool, 4, 8, false);
  const rates: Record<string, number> = {};
  for (const [concurrency, total] of [
    [1, 8],
    [32, 64],
  ] as const) {
    const free = await throughput(pool, concurrency, total, false);
    const structured = await throughput(pool, concurrency, total, true);
    rates[`c${concurrency}FreeTokensPerS`] = round(free, 1);
    rates[`c${concurrency}SchemaTokensPerS`] = round(structured, 1);
    rates[`c${concurrency}Ratio`] = round(structured / free, 3);
    console.log(`c=${concurrency}: free ${round(free, 1)} tok/s, JSON schema ${round(structured, 1)} tok/s`);
  }
  const steady = await streamGaps(pool, false, 0);
  const loaded = await streamGaps(pool, true, Date.now());
  const gaps = {
    steadyGapP50Ms: round(percentile(steady, 50), 2),
    steadyGapP99Ms: round(percentile(steady, 99), 2),
    arrivalsGapP50Ms: round(percentile(loaded, 50), 2),
    arrivalsGapP99Ms: round(percentile(loaded, 99), 2),
    gapP99Ratio: round(percentile(loaded, 99) / percentile(steady, 99), 3),
  };
  console.log('gaps', gaps);
  const result = {
    date: new Date().toISOString(),
    machine: machineInfo(),
    model: { ...SHAPE, parameters: written.parameters },
    engine,
    rates,
    gaps,
  };
  await mkdir(RESULTS_DIR, { recursive: true });
  await writeFile(`${RESULTS_DIR}structured.json`, `${JSON.stringify(result, null, 2)}\n`);
  console.log(JSON.stringify(result, null, 2));
} finally {
  await pool.close();
}
