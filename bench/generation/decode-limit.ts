// The decode limit: the bundled model's ONNX session called directly in a loop with full batches at a given past
// length, as many tokens per second as decode steps alone can give (no scheduling, sampling or detokenizing).
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { threadCpuMs } from '../../packages/inference/src/runners/thread-cpu.js';

/** The part of onnxruntime-node's API the limit uses. */
declare namespace Ort {
  interface Tensor {
    readonly dims: readonly number[];
  }
  interface InferenceSession {
    readonly inputNames: readonly string[];
    run(feeds: Record<string, Tensor>): Promise<Record<string, Tensor>>;
  }
}
interface OrtModule {
  readonly Tensor: new (type: string, data: BigInt64Array | Float32Array, dims: readonly number[]) => Ort.Tensor;
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
  /** The cost of prefilling one prompt token (batches of 4 prompts of `promptLength` tokens), in ms. */
  readonly prefillMsPerToken: number;
  /** CPU time of the decode steps per generated token, in ms (Linux; 0 elsewhere). */
  readonly cpuMsPerToken: number;
}

/** Loads the model once (1 intra-op thread, as the pool's workers) and returns a measuring function. */
export async function decodeLimiter(
  modelDir: string,
): Promise<(batch: number, past: number, steps: number, promptLength: number) => Promise<DecodeLimit>> {
  const session = await ort.InferenceSession.create(join(modelDir, 'onnx', 'model.onnx'), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    enableCpuMemArena: false,
  });
  const pasts = session.inputNames.filter((name) => name.startsWith('past_key_values.'));
  const prefillMs = async (rows: number, length: number, runs: number): Promise<number> => {
    const feeds: Record<string, Ort.Tensor> = {
      input_ids: new ort.Tensor('int64', new BigInt64Array(rows * length).fill(300n), [rows, length]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(rows * length).fill(1n), [rows, length]),
      position_ids: new ort.Tensor('int64', BigInt64Array.from({ length: rows * length }, (_, i) => BigInt(i % length)), [rows, length]),
    };
    for (const name of pasts) feeds[name] = new ort.Tensor('float32', new Float32Array(0), [rows, 4, 0, 16]);
    await session.run(feeds);
    const started = performance.now();
    for (let i = 0; i < runs; i += 1) await session.run(feeds);
    return (performance.now() - started) / runs;
  };
  return async (batch, past, steps, promptLength) => {
    const feeds: Record<string, Ort.Tensor> = {
      input_ids: new ort.Tensor('int64', new BigInt64Array(batch).fill(300n), [batch, 1]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(batch * (past + 1)).fill(1n), [batch, past + 1]),
      position_ids: new ort.Tensor('int64', new BigInt64Array(batch).fill(BigInt(past)), [batch, 1]),
    };
    for (const name of pasts) feeds[name] = new ort.Tensor('float32', new Float32Array(batch * 4 * past * 16).fill(0.01), [batch, 4, past, 16]);
    for (let i = 0; i < 5; i += 1) await session.run(feeds);
    const started = performance.now();
    const cpuBefore = threadCpuMs();
    for (let i = 0; i < steps; i += 1) await session.run(feeds);
    const stepMs = (performance.now() - started) / steps;
    const cpuMsPerToken = (threadCpuMs() - cpuBefore) / (steps * batch);
    const prefillMsPerToken = (await prefillMs(4, promptLength, 20)) / (4 * promptLength);
    return { batch, past, stepMs, tokensPerSecond: (batch * 1000) / stepMs, prefillMsPerToken, cpuMsPerToken };
  };
}
