// The Llama-shaped decoder that `pnpm bench:models` writes (test-kit's writeLlamaModel), at a tiny size: it has the
// bundled transformers.js export's inputs and outputs, the same bytes every time, and both text-generation runners
// load it unchanged and decode it greedily to the same tokens.
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWorkerPool } from '@microbatch/inference';
import type { TextGenerationInput } from '@microbatch/inference';
import { llamaParameters, writeLlamaModel } from '@microbatch/test-kit';
import type { LlamaShape } from '@microbatch/test-kit';
import { InferenceSession } from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

/** About 0.75M parameters, 2 layers like the bundled model (so the KV input names are the same), GQA 4:2. */
const SHAPE: LlamaShape = {
  hidden: 128,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  intermediate: 512,
  vocab: 2048,
  positions: 1024,
  seed: 5,
};
const INPUTS: TextGenerationInput[] = [
  { prompt: 'Once upon a time', max_new_tokens: 12, temperature: 0 },
  {
    prompt: 'Lily saw a big red ball under a tree. She wanted to play with it, but',
    max_new_tokens: 20,
    temperature: 0,
  },
  { prompt: 'Tom', max_new_tokens: 7, temperature: 0 },
];

let root: string;
let dir: string;

beforeAll(async () => {
  await ensureWorkerBuilt();
  root = await mkdtemp(join(tmpdir(), 'microbatch-llama-'));
  dir = join(root, 'llama');
  await writeLlamaModel(dir, SHAPE, TINYSTORIES_DIR);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const sha256 = async (path: string) =>
  createHash('sha256')
    .update(await readFile(path))
    .digest('hex');

describe('writeLlamaModel', () => {
  it('has the inputs and outputs (names, types, symbolic dims) of the bundled transformers.js export', async () => {
    const [bundled, written] = await Promise.all([
      InferenceSession.create(join(TINYSTORIES_DIR, 'onnx', 'model.onnx')),
      InferenceSession.create(join(dir, 'onnx', 'model.onnx')),
    ]);
    expect(written.inputNames).toEqual(bundled.inputNames);
    expect(written.outputNames).toEqual(bundled.outputNames);
    const headDim = SHAPE.hidden / SHAPE.heads;
    // Same element types and dims, with this model's KV heads and head size in place of the bundled model's.
    const expected = (metadata: typeof bundled.inputMetadata) =>
      metadata.map((info) => {
        if (!info.isTensor) return info;
        const shape =
          info.name.includes('.key') || info.name.includes('.value')
            ? [info.shape[0], SHAPE.kvHeads, info.shape[2], headDim]
            : info.name === 'logits'
              ? [info.shape[0], info.shape[1], SHAPE.vocab]
              : info.shape;
        return { ...info, shape };
      });
    expect(written.inputMetadata).toEqual(expected(bundled.inputMetadata));
    expect(written.outputMetadata).toEqual(expected(bundled.outputMetadata));
    const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    expect(config).toMatchObject({
      model_type: 'llama',
      num_key_value_heads: SHAPE.kvHeads,
      num_attention_heads: SHAPE.heads,
      head_dim: headDim,
      vocab_size: SHAPE.vocab,
      max_position_embeddings: SHAPE.positions,
    });
    expect(config.microbatch_dummy_weights.parameters).toBe(llamaParameters(SHAPE));
    await Promise.all([bundled.release(), written.release()]);
  });

  it('writes the same bytes every time, and skips a folder that already holds the shape', async () => {
    const again = await writeLlamaModel(join(root, 'again'), SHAPE, TINYSTORIES_DIR);
    expect(again.written).toBe(true);
    expect(await sha256(join(root, 'again', 'onnx', 'model.onnx'))).toBe(await sha256(join(dir, 'onnx', 'model.onnx')));
    const skipped = await writeLlamaModel(dir, SHAPE, TINYSTORIES_DIR);
    expect(skipped).toMatchObject({ written: false, bytes: again.bytes });
    // A folder whose model file is gone is written again.
    await rm(join(root, 'again', 'onnx', 'model.onnx'));
    expect(await writeLlamaModel(join(root, 'again'), SHAPE, TINYSTORIES_DIR)).toMatchObject({ written: true });
    expect(await sha256(join(root, 'again', 'onnx', 'model.onnx'))).toBe(await sha256(join(dir, 'onnx', 'model.onnx')));
    // Another seed is another model.
    await writeLlamaModel(join(root, 'other'), { ...SHAPE, seed: 6 }, TINYSTORIES_DIR);
    expect(await sha256(join(root, 'other', 'onnx', 'model.onnx'))).not.toBe(
      await sha256(join(dir, 'onnx', 'model.onnx')),
    );
  });

  it('rejects a shape whose KV heads do not divide the query heads', async () => {
    await expect(writeLlamaModel(join(root, 'bad'), { ...SHAPE, kvHeads: 3 }, TINYSTORIES_DIR)).rejects.toThrow(
      'Expected `kvHeads` (3) to divide `heads` (4)',
    );
  });

  it('generates the same greedy tokens with continuous and request scheduling, batched and alone', async () => {
    const texts = async (scheduling: 'continuous' | 'request', batched: boolean) => {
      const pool = createWorkerPool({
        runner: { task: 'text-generation', model: dir, scheduling },
      });
      try {
        await pool.ready;
        const results = batched
          ? await pool.run(INPUTS)
          : (await Promise.all(INPUTS.map((input) => pool.run([input])))).flat();
        return results.map((result) => {
          if (result instanceof Error) throw result;
          return { text: result.text, tokens: result.usage.completion_tokens, finish: result.finish_reason };
        });
      } finally {
        await pool.close();
      }
    };
    const continuous = await texts('continuous', true);
    // The EOS embedding row is zero: greedy decoding never stops early, every request runs to its max_new_tokens.
    expect(continuous.map((result) => result.tokens)).toEqual(INPUTS.map((input) => input.max_new_tokens));
    expect(continuous.every((result) => result.finish === 'length' && result.text.length > 0)).toBe(true);
    expect(await texts('continuous', false)).toEqual(continuous);
    expect(await texts('request', true)).toEqual(continuous);
  });
});
