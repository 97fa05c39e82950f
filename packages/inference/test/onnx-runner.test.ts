import { rm } from 'node:fs/promises';
import { createBatcher, isBatchError } from '@microbatch/core';
import { createWorkerPool } from '@microbatch/inference';
import type { OnnxInput, OnnxOutput, WorkerPool } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIM, buildTestModels, embeddingOf } from './helpers/tiny-models.js';
import type { TestModels } from './helpers/tiny-models.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';
import { loadOnnxRunner } from '../src/runners/onnx.js';
import { resolveRunnerSpec } from '../src/spec/runner-spec.js';
import type { OnnxRunnerSpec } from '../src/contract/runner-specs.js';

let models: TestModels;
let pool: WorkerPool<OnnxInput, OnnxOutput>;

const SEQUENCES = [[1, 80, 147, 201, 282, 215], [5], [1, 2047, 3], [9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9], [0, 1]];

beforeAll(async () => {
  await ensureWorkerBuilt();
  models = await buildTestModels();
  pool = createWorkerPool({ runner: { task: 'onnx', model: models.embedderOnnx } });
  await pool.ready;
});

afterAll(async () => {
  await pool?.close();
  if (models !== undefined) await rm(models.root, { recursive: true, force: true });
});

/** The model's math redone in JS: every value is a multiple of 1/8, so float32 sums are exact. */
function expectedMean(ids: readonly number[]): Float32Array {
  const sums = new Array<number>(DIM).fill(0);
  for (const id of ids) embeddingOf(id).forEach((value, d) => (sums[d] = (sums[d] as number) + value));
  return Float32Array.from(sums.map((sum) => Math.fround(sum / ids.length)));
}

describe('onnx runner', () => {
  it("gives each item's outputs buffers of their own, which the worker moves to the main thread uncopied", async () => {
    const spec = resolveRunnerSpec({ task: 'onnx', model: models.embedderOnnx }) as Required<OnnxRunnerSpec>;
    const cancel = new SharedArrayBuffer(4);
    const runner = await loadOnnxRunner(spec, {
      index: 0,
      spec,
      executionProvider: 'cpu',
      threads: 1,
      hooks: undefined,
      cancel,
    });
    const results = await runner.run([{ input_ids: [1, 2, 3] }, { input_ids: [5] }, { input_ids: 'bad' }], undefined);
    const buffers = runner.transferables?.(results) ?? [];
    const datas = results.flatMap((result) =>
      result.ok ? Object.values(result.value as OnnxOutput).map((tensor) => tensor.data as Float32Array) : [],
    );
    // Two items, two outputs each: four buffers, each exactly one item's output.
    expect(datas).toHaveLength(4);
    expect(new Set(buffers).size).toBe(4);
    for (const data of datas) {
      expect(buffers).toContain(data.buffer);
      expect(data.byteLength).toBe(data.buffer.byteLength);
    }
    // Moving them leaves the worker nothing it reads again: the next run answers the same.
    structuredClone(results, { transfer: buffers });
    expect(datas.every((data) => data.length === 0)).toBe(true);
    const again = await runner.run([{ input_ids: [1, 2, 3] }], undefined);
    expect((again[0] as { value: OnnxOutput }).value.embeddings?.data).toEqual(expectedMean([1, 2, 3]));
  });

  it('pads a batch with an attention mask, and gives exactly the one-by-one outputs, padding removed', async () => {
    const inputs = SEQUENCES.map((ids) => ({ input_ids: ids }));
    const batched = (await pool.run(inputs)) as OnnxOutput[];
    const single: OnnxOutput[] = [];
    for (const input of inputs) single.push(...((await pool.run([input])) as OnnxOutput[]));
    expect(batched).toEqual(single);
    batched.forEach((output, index) => {
      const ids = SEQUENCES[index] as number[];
      expect(output.embeddings).toEqual({ type: 'float32', dims: [DIM], data: expectedMean(ids) });
      expect(output.token_embeddings).toEqual({
        type: 'float32',
        dims: [ids.length, DIM],
        data: Float32Array.from(ids.flatMap(embeddingOf)),
      });
    });
  });

  it('returns only the requested outputs and pads on the left when configured', async () => {
    const left = createWorkerPool({
      runner: { task: 'onnx', model: models.embedderOnnx, outputs: ['token_embeddings'], paddingSide: 'left' },
    });
    try {
      await left.ready;
      const outputs = (await left.run([{ input_ids: [3, 4, 5] }, { input_ids: [6] }])) as OnnxOutput[];
      expect(outputs).toEqual([
        {
          token_embeddings: {
            type: 'float32',
            dims: [3, DIM],
            data: Float32Array.from([3, 4, 5].flatMap(embeddingOf)),
          },
        },
        { token_embeddings: { type: 'float32', dims: [1, DIM], data: Float32Array.from(embeddingOf(6)) } },
      ]);
    } finally {
      await left.close();
    }
  });

  it('fails only the invalid items with INVALID_INPUT naming the input', async () => {
    const results = await pool.run([{ input_ids: [1, 2] }, { input_ids: [0.5] }, { tokens: [1] }]);
    expect((results[0] as OnnxOutput).embeddings?.data).toEqual(expectedMean([1, 2]));
    expect(isBatchError(results[1], 'INVALID_INPUT') && results[1].details).toEqual({ field: 'input_ids' });
    expect(isBatchError(results[2], 'INVALID_INPUT') && results[2].message).toBe('The model has no input `tokens`');
  });

  it('serves a batcher: concurrent calls share one padded run', async () => {
    const embed = createBatcher(pool.handler, { batchWaitTimeoutMs: 20, maxConcurrentBatches: pool.size });
    const sizes: number[] = [];
    const outputs = await Promise.all(
      SEQUENCES.map((ids) => embed({ input_ids: ids }, { onDispatch: (info) => sizes.push(info.batchSize) })),
    );
    expect(sizes).toEqual(SEQUENCES.map(() => SEQUENCES.length));
    outputs.forEach((output, index) =>
      expect(output.embeddings?.data).toEqual(expectedMean(SEQUENCES[index] as number[])),
    );
    await embed.close();
  });

  it('refuses an output name the model does not have, at load', async () => {
    const bad = createWorkerPool({ runner: { task: 'onnx', model: models.embedderOnnx, outputs: ['logits'] } });
    await expect(bad.ready).rejects.toThrow(
      `Failed to load the onnx model from "${models.embedderOnnx}": The model has no output \`logits\`; its outputs are embeddings, token_embeddings`,
    );
    await bad.close();
  });
});
