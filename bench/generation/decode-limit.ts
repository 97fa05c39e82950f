// The decode limit: the bundled model's ONNX session called directly in a loop with full batches at a given past
// length, as many tokens per second as decode steps alone can give (no scheduling, sampling or detokenizing).
//
// And the same limit for rows of different lengths: a decode step's KV is one rectangular tensor per call, so rows
// of a real workload either pad to the longest one or split into several calls. `spread` draws full batches of row
// lengths from the workload's own decode steps and runs them split into length groups exactly as the decode loop
// splits them (its splitter and inputs; the fastest of its splits into 1 to 8 groups): what a scheduler over this
// graph that batches rows in rectangular calls could reach at that spread, with no prefill, copies, sampling or JS.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { seededRandom } from '@microbatch/core/util';
import { calibrateStepCost } from '../../packages/inference/src/runners/continuous/calibrate.js';
import { splitByLength } from '../../packages/inference/src/runners/continuous/length-groups.js';
import { decodeFeeds, prefillFeeds } from '../../packages/inference/src/runners/continuous/padded-batch.js';
import { releaseBuffers } from '../../packages/inference/src/runners/continuous/released-buffers.js';
import type { ModelGeometry } from '../../packages/inference/src/runners/continuous/padded-batch.js';
import { threadCpuMs } from '../../packages/inference/src/runners/thread-cpu.js';

/** The part of onnxruntime-node's API the limit uses. */
declare namespace Ort {
  interface Tensor {
    readonly dims: readonly number[];
    readonly data: Float32Array | BigInt64Array;
  }
  interface InferenceSession {
    readonly inputNames: readonly string[];
    run(feeds: Record<string, Tensor>): Promise<Record<string, Tensor>>;
  }
}
interface OrtModule {
  readonly InferenceSession: { create(path: string, options: Record<string, unknown>): Promise<Ort.InferenceSession> };
}

// onnxruntime-node is a dependency of @microbatch/inference, resolved from there (the bench does not install it twice).
const require = createRequire(new URL('../../packages/inference/package.json', import.meta.url));
const ort = require('onnxruntime-node') as OrtModule;

export interface DecodeLimit {
  readonly batch: number;
  readonly past: number;
  readonly stepMs: number;
  readonly tokensPerSecond: number;
  /**
   * The same full batch run as 1, 2 or 4 equal calls, whichever is fastest: one call of many rows can outgrow the
   * CPU's caches and cost more than the same rows in smaller calls.
   */
  readonly bestSplit: { readonly calls: number; readonly tokensPerSecond: number };
  /** The cost of prefilling one prompt token (batches of 4 prompts of `promptLength` tokens), in ms. */
  readonly prefillMsPerToken: number;
  /** CPU time of the decode steps per generated token, in ms (Linux; 0 elsewhere). */
  readonly cpuMsPerToken: number;
  /** Full batches drawn from the workload's row lengths, split into length groups as the decode loop splits them. */
  readonly spread: SpreadLimit | undefined;
}

interface SplitLimit {
  readonly calls: number;
  readonly stepMs: number;
}

export interface SpreadLimit {
  /** A step of the drawn rows split into length groups, over the same rows at their mean length (one call, no padding). */
  readonly costOverEven: number;
  readonly callsPerStep: number;
  /** Positions attended to, padding included, over the real ones. */
  readonly paddingOverhead: number;
}

/** Full batches drawn for the spread limit (the first 4 warm up). */
const SPREAD_STEPS = 48;

/**
 * Loads the model once (1 intra-op thread, as the pool's workers) and returns a measuring function. With `budgetMs`,
 * each timed loop (decode steps, each split, prefill runs) stops once it has run that long (at least 5 runs), and the
 * length-spread draws are cut to fit 4x that budget: for models whose steps take 100 ms and more.
 */
export async function decodeLimiter(
  modelDir: string,
  budgetMs = Number.POSITIVE_INFINITY,
): Promise<
  (
    batch: number,
    past: number,
    steps: number,
    promptLength: number,
    lengths?: readonly number[],
  ) => Promise<DecodeLimit>
> {
  const session = await ort.InferenceSession.create(join(modelDir, 'onnx', 'model.onnx'), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    enableCpuMemArena: false,
  });
  const pasts = session.inputNames.filter((name) => name.startsWith('past_key_values.'));
  // The model's geometry from its config.json, read as the runner reads it (pad id 0: the bundled tokenizer's <unk>).
  const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8')) as Record<string, number>;
  const heads = config.num_attention_heads ?? 1;
  const geometry: ModelGeometry = {
    pastNames: pasts,
    presentNames: pasts.map((name) => name.replace('past_key_values.', 'present.')),
    kvHeads: config.num_key_value_heads ?? heads,
    headDim: config.head_dim ?? (config.hidden_size ?? heads) / heads,
    vocabSize: config.vocab_size ?? 0,
    padTokenId: 0,
    positionIds: session.inputNames.includes('position_ids'),
  };
  /**
   * Decode inputs for rows of `lengths` (left-padded to the longest, KV filled with 0.01), built as the loop builds
   * them; `kv` is theirs to free after the run.
   */
  const decodeInputs = (lengths: readonly number[]) => {
    const past = Math.max(...lengths);
    const size = lengths.length * geometry.kvHeads * past * geometry.headDim;
    const source = { data: pasts.map(() => new Float32Array(size).fill(0.01)), past };
    const rows = lengths.map((length, row) => ({ source, row, length, next: 300 }));
    return { feeds: decodeFeeds(rows, source, geometry) as unknown as Record<string, Ort.Tensor>, kv: source.data };
  };
  const model = await calibrateStepCost(session as unknown as Parameters<typeof calibrateStepCost>[0], geometry);
  /**
   * Decode steps of `batch` rows whose lengths are drawn from `lengths`, interleaved with steps of the same rows all
   * at their mean length (one call, no padding), measured alike (fresh inputs, outputs freed as the loop frees
   * them). Each draw is split as the loop's splitter splits it with at most 1, 2, 3, 4, 6 or 8 groups, and the
   * fastest split counts: the bound does not depend on how well the cost model was calibrated.
   */
  const spreadLimit = async (batch: number, lengths: readonly number[]): Promise<SpreadLimit> => {
    const random = seededRandom(batch);
    const draws = Array.from({ length: SPREAD_STEPS }, () =>
      Array.from({ length: batch }, () => lengths[Math.floor(random() * lengths.length)] as number).sort(
        (a, b) => a - b,
      ),
    );
    const run = async (groups: readonly (readonly number[])[]) => {
      let ms = 0;
      for (const group of groups) {
        const { feeds, kv } = decodeInputs(group);
        const started = performance.now();
        const outputs = await session.run(feeds);
        ms += performance.now() - started;
        releaseBuffers([...Object.values(outputs).map((output) => output.data), ...kv]);
      }
      return ms;
    };
    let split = 0;
    let even = 0;
    let calls = 0;
    let padded = 0;
    let real = 0;
    const spreadStarted = performance.now();
    let measured = 0;
    for (const [index, rows] of draws.entries()) {
      if (index >= 8 && performance.now() - spreadStarted > 4 * budgetMs) break;
      const splits = new Map<string, number[][]>();
      for (const most of [1, 2, 3, 4, 6, 8]) {
        let start = 0;
        const groups = splitByLength(rows, model, most).map((end) => rows.slice(start, (start = end)));
        splits.set(groups.map((group) => group.length).join(), groups);
      }
      const mean = Math.round(rows.reduce((sum, length) => sum + length, 0) / rows.length);
      const evenMs = await run([rows.map(() => mean)]);
      let best = { ms: Number.POSITIVE_INFINITY, groups: [] as number[][] };
      for (const groups of splits.values()) {
        const ms = await run(groups);
        if (ms < best.ms) best = { ms, groups };
      }
      // The first draws warm the shapes up.
      if (index < 4) continue;
      measured += 1;
      split += best.ms;
      even += evenMs;
      calls += best.groups.length;
      padded += best.groups.reduce((sum, group) => sum + group.length * (Math.max(...group) + 1), 0);
      real += rows.reduce((sum, length) => sum + length + 1, 0);
    }
    return { costOverEven: split / even, callsPerStep: calls / measured, paddingOverhead: padded / real };
  };
  // Outputs are freed at once, as the decode loop frees them: left to V8, ~4 MB of fresh buffers a step start full
  // collections of this process's heap in the middle of the measurement.
  const runFreed = async (feeds: Record<string, Ort.Tensor>) => {
    const outputs = await session.run(feeds);
    releaseBuffers(Object.values(outputs).map((output) => output.data));
  };
  const prefillMs = async (rows: number, length: number, runs: number): Promise<number> => {
    const prompts = Array.from({ length: rows }, () => new Array<number>(length).fill(300));
    const feeds = prefillFeeds(prompts, undefined, geometry) as unknown as Record<string, Ort.Tensor>;
    await runFreed(feeds);
    const started = performance.now();
    let done = 0;
    while (done < runs && (done < 5 || performance.now() - started < budgetMs)) {
      await runFreed(feeds);
      done += 1;
    }
    return (performance.now() - started) / done;
  };
  return async (batch, past, steps, promptLength, lengths) => {
    const { feeds } = decodeInputs(new Array<number>(batch).fill(past));
    for (let i = 0; i < 5; i += 1) await runFreed(feeds);
    const started = performance.now();
    const cpuBefore = threadCpuMs();
    let done = 0;
    while (done < steps && (done < 5 || performance.now() - started < budgetMs)) {
      await runFreed(feeds);
      done += 1;
    }
    const stepMs = (performance.now() - started) / done;
    const cpuMsPerToken = (threadCpuMs() - cpuBefore) / (done * batch);
    // The same full batch run as 2 or 4 calls of equal rows, measured the same way.
    const split: SplitLimit[] = [];
    for (const calls of [2, 4].filter((count) => batch % count === 0)) {
      const { feeds: part } = decodeInputs(new Array<number>(batch / calls).fill(past));
      for (let i = 0; i < 5; i += 1) await runFreed(part);
      const start = performance.now();
      let runs = 0;
      while (runs < steps * calls && (runs < 5 * calls || performance.now() - start < budgetMs)) {
        await runFreed(part);
        runs += 1;
      }
      split.push({ calls, stepMs: (performance.now() - start) / (runs / calls) });
    }
    const best = split.reduce((fastest, next) => (next.stepMs < fastest.stepMs ? next : fastest), { calls: 1, stepMs });
    const prefillMsPerToken = (await prefillMs(4, promptLength, 20)) / (4 * promptLength);
    const spread = lengths === undefined || lengths.length === 0 ? undefined : await spreadLimit(batch, lengths);
    return {
      batch,
      past,
      stepMs,
      tokensPerSecond: (batch * 1000) / stepMs,
      bestSplit: { calls: best.calls, tokensPerSecond: (batch * 1000) / best.stepMs },
      prefillMsPerToken,
      cpuMsPerToken,
      spread,
    };
  };
}
