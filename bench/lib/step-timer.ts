// Times one model's ONNX session directly (1 intra-op thread, as a pool's worker runs it): a prefill call of a
// prompt and a decode step of a batch over a given past, with the inputs a transformers.js decoder export takes.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { median } from './stats.js';
import { GRAPH_NAMES, findModelFile } from '@microbatch/inference';

interface OrtTensor {
  readonly dims: readonly number[];
}
interface OrtModule {
  readonly Tensor: new (type: string, data: Float32Array | BigInt64Array, dims: readonly number[]) => OrtTensor;
  readonly InferenceSession: {
    create(
      path: string,
      options: Record<string, unknown>,
    ): Promise<{
      readonly inputNames: readonly string[];
      run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
      release(): Promise<void>;
    }>;
  };
}

// onnxruntime-node is a dependency of @microbatch/inference, resolved from there (the bench does not install it twice).
const ort = createRequire(new URL('../../packages/inference/package.json', import.meta.url))(
  'onnxruntime-node',
) as OrtModule;

/** What {@link stepTimer} measures, in ms (medians). */
export interface StepTimer {
  /** One call over `batch` rows of `length` new tokens each after `past` cached ones (a decode step is length 1). */
  time(batch: number, length: number, past: number): Promise<number>;
  close(): Promise<void>;
}

/**
 * Loads `modelDir`'s decoder graph (`onnx/model.onnx`, or the one file of a q8 / q4 bench folder: what
 * `dtype: 'auto'` picks) and returns a timer. Each measurement runs once to warm up, then until
 * `budgetMs` has passed (at least 3 runs) and reports the median.
 */
export async function stepTimer(modelDir: string, budgetMs = 1500): Promise<StepTimer> {
  const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8')) as Record<string, number>;
  const heads = config.num_attention_heads as number;
  const kvHeads = config.num_key_value_heads ?? heads;
  const headDim = config.head_dim ?? (config.hidden_size as number) / heads;
  const session = await ort.InferenceSession.create(findModelFile(modelDir, 'auto', GRAPH_NAMES.decoder).path, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    enableCpuMemArena: false,
  });
  const pasts = session.inputNames.filter((name) => name.startsWith('past_key_values.'));
  const int64 = (rows: number, cols: number, value: (col: number) => number) =>
    new ort.Tensor(
      'int64',
      BigInt64Array.from({ length: rows * cols }, (_, i) => BigInt(value(i % cols))),
      [rows, cols],
    );
  const feeds = (batch: number, length: number, past: number) => {
    const kv = new Float32Array(batch * kvHeads * past * headDim).fill(0.01);
    const inputs: Record<string, OrtTensor> = {
      input_ids: int64(batch, length, (col) => 300 + col),
      attention_mask: int64(batch, past + length, () => 1),
    };
    if (session.inputNames.includes('position_ids')) inputs.position_ids = int64(batch, length, (col) => past + col);
    for (const name of pasts) inputs[name] = new ort.Tensor('float32', kv, [batch, kvHeads, past, headDim]);
    return inputs;
  };
  return {
    async time(batch, length, past) {
      const inputs = feeds(batch, length, past);
      await session.run(inputs);
      const times: number[] = [];
      const started = performance.now();
      while (times.length < 3 || performance.now() - started < budgetMs) {
        const start = performance.now();
        await session.run(inputs);
        times.push(performance.now() - start);
      }
      return median(times);
    },
    close: () => session.release(),
  };
}
