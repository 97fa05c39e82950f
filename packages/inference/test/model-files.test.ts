// Which ONNX file a runner loads (`dtype`), and the start-up errors of a folder that lacks it: the file the dtype
// names, any loadable file, or the external data file its graph keeps its weights in. Each error is the pool's
// `ready` rejection (UNAVAILABLE) naming what is missing, or a TypeError at creation: never a hang or a stack.
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isBatchError } from '@microbatch/core';
import { createWorkerPool } from '@microbatch/inference';
import type { RunnerSpec, WorkerPool } from '@microbatch/inference';
import { writeLlamaModel } from '@microbatch/test-kit';
import type { LlamaShape } from '@microbatch/test-kit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decoderGeometry } from '../src/runners/decoder-config.js';
import { externalDataFiles } from '../src/runners/external-data.js';
import { GRAPH_NAMES, resolveModelFile } from '../src/runners/model-files.js';
import { TINYSTORIES_DIR } from './helpers/paths.js';
import { ensureWorkerBuilt } from './helpers/worker-build.js';

const SHAPE: LlamaShape = {
  hidden: 32,
  layers: 1,
  heads: 2,
  kvHeads: 1,
  intermediate: 64,
  vocab: 2048,
  positions: 128,
  seed: 9,
};

let root: string;
/** fp32 `model.onnx` and a copy named as q8's `model_quantized.onnx`. */
let twoDtypes: string;
/** Weights in `model.onnx_data`. */
let external: string;
/** `config.json` and `tokenizer.json`, no ONNX file. */
let noGraph: string;
const pools: WorkerPool<unknown, unknown>[] = [];

beforeAll(async () => {
  await ensureWorkerBuilt();
  root = await mkdtemp(join(tmpdir(), 'microbatch-model-files-'));
  twoDtypes = join(root, 'two-dtypes');
  await writeLlamaModel(twoDtypes, SHAPE, TINYSTORIES_DIR);
  await copyFile(join(twoDtypes, 'onnx', 'model.onnx'), join(twoDtypes, 'onnx', 'model_quantized.onnx'));
  external = join(root, 'external');
  await writeLlamaModel(external, SHAPE, TINYSTORIES_DIR, { externalData: true });
  noGraph = join(root, 'no-graph');
  await mkdir(join(noGraph, 'onnx'), { recursive: true });
  for (const file of ['config.json', 'tokenizer.json']) await copyFile(join(twoDtypes, file), join(noGraph, file));
});

afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('resolveModelFile', () => {
  it("picks the first present in the CPU order for 'auto', and the named file for an explicit dtype", () => {
    expect(resolveModelFile(twoDtypes, 'auto', GRAPH_NAMES.decoder)).toEqual({
      dtype: 'q8',
      graph: 'model',
      path: join(twoDtypes, 'onnx', 'model_quantized.onnx'),
    });
    expect(resolveModelFile(twoDtypes, 'fp32', GRAPH_NAMES.decoder).path).toBe(join(twoDtypes, 'onnx', 'model.onnx'));
  });

  it('names the dtypes the folder has when the one asked for is missing', () => {
    expect(() => resolveModelFile(twoDtypes, 'q4', GRAPH_NAMES.decoder)).toThrow(
      `dtype 'q4' needs onnx/model_q4.onnx or onnx/decoder_model_merged_q4.onnx in ${twoDtypes}; it has ` +
        'q8 (onnx/model_quantized.onnx), fp32 (onnx/model.onnx)',
    );
  });

  it('finds a merged decoder, which an encoder task does not load', async () => {
    const merged = join(root, 'merged-only');
    await mkdir(join(merged, 'onnx'), { recursive: true });
    await copyFile(join(twoDtypes, 'onnx', 'model.onnx'), join(merged, 'onnx', 'decoder_model_merged_q4.onnx'));
    expect(resolveModelFile(merged, 'auto', GRAPH_NAMES.decoder)).toMatchObject({
      dtype: 'q4',
      graph: 'decoder_model_merged',
    });
    expect(() => resolveModelFile(merged, 'auto', GRAPH_NAMES.encoder)).toThrow(
      `dtype 'auto' needs onnx/model{_quantized,_int8,_uint8,_q4,_bnb4,,_q4f16,_fp16}.onnx in ${merged}; it has no ONNX model`,
    );
  });

  it('reads the external data file a graph names, and refuses the graph when it is missing', async () => {
    expect(externalDataFiles(join(external, 'onnx', 'model.onnx'))).toEqual(['model.onnx_data']);
    expect(externalDataFiles(join(twoDtypes, 'onnx', 'model.onnx'))).toEqual([]);
    const lost = join(root, 'lost-data');
    await mkdir(join(lost, 'onnx'), { recursive: true });
    await copyFile(join(external, 'onnx', 'model.onnx'), join(lost, 'onnx', 'model.onnx'));
    expect(() => resolveModelFile(lost, 'auto', GRAPH_NAMES.decoder)).toThrow(
      'onnx/model.onnx keeps its weights in onnx/model.onnx_data, which is missing: download it beside the graph',
    );
  });
});

describe('decoderGeometry', () => {
  const kvInput = (kvHeads: number | string, headDim: number | string) => [
    {
      name: 'past_key_values.0.key',
      isTensor: true as const,
      type: 'float32' as const,
      shape: ['batch_size', kvHeads, 'past_sequence_length', headDim],
    },
  ];

  it("reads each family's names: GPT-2's n_head / n_embd, Gemma's head_dim, multi-query's one KV head", () => {
    expect(
      decoderGeometry({ model_type: 'gpt2', n_head: 12, n_embd: 768, n_positions: 1024 }, kvInput(12, 64)),
    ).toEqual({ kvHeads: 12, headDim: 64, positions: 1024 });
    const gemma = {
      model_type: 'gemma',
      num_attention_heads: 8,
      num_key_value_heads: 1,
      hidden_size: 2048,
      head_dim: 256,
    };
    expect(decoderGeometry(gemma, kvInput(1, 256))).toMatchObject({ kvHeads: 1, headDim: 256 });
    const bigcode = { model_type: 'gpt_bigcode', n_head: 4, n_embd: 64, multi_query: true };
    expect(decoderGeometry(bigcode, kvInput('kv', 'dim'))).toMatchObject({ kvHeads: 1, headDim: 16 });
  });

  it('refuses a config whose geometry disagrees with the graph, or that has none, and a fused 3-D KV input', () => {
    expect(() =>
      decoderGeometry({ model_type: 'llama', num_attention_heads: 4, hidden_size: 64 }, kvInput(2, 16)),
    ).toThrow("config.json (model_type 'llama') gives KV heads 4, but the graph's `past_key_values.0.key` has 2");
    const fused = [
      {
        name: 'past_key_values.0.key_value',
        isTensor: true as const,
        type: 'float32' as const,
        shape: ['batch_size', 'past_sequence_length', 32],
      },
    ];
    expect(() =>
      decoderGeometry({ model_type: 'gpt_bigcode', n_head: 4, n_embd: 64, multi_query: true }, fused),
    ).toThrow(
      "the decode loop drives 4-D KV inputs [batch, KV heads, past, head size]; the graph's " +
        "`past_key_values.0.key_value` has 3 dims: use `scheduling: 'request'` for this model",
    );
    expect(() => decoderGeometry({ model_type: 'gpt2', n_embd: 64 }, [])).toThrow(
      "config.json (model_type 'gpt2') has no `n_head` and `n_embd`",
    );
  });
});

describe('dtype at start-up', () => {
  const start = (runner: RunnerSpec) => {
    const pool = createWorkerPool({ runner });
    pools.push(pool as WorkerPool<unknown, unknown>);
    return pool.ready.then(
      () => undefined,
      (error: unknown) => error,
    );
  };

  it('refuses an unknown dtype at once, naming the choices', () => {
    expect(() =>
      createWorkerPool({ runner: { task: 'text-generation', model: twoDtypes, dtype: 'q3' as 'q4' } }),
    ).toThrow(
      new TypeError(
        "Expected `runner.dtype` to be one of 'auto', 'q8', 'int8', 'uint8', 'q4', 'bnb4', 'fp32', 'q4f16', 'fp16', " +
          'got `"q3"` (string)',
      ),
    );
  });

  it.each([
    ['text-generation (continuous)', { task: 'text-generation', scheduling: 'continuous' }],
    ['text-generation (request)', { task: 'text-generation', scheduling: 'request' }],
    ['feature-extraction', { task: 'feature-extraction' }],
  ] as const)('%s: a missing dtype file fails ready, naming the dtypes the folder has', async (_, spec) => {
    const error = await start({ ...spec, model: twoDtypes, dtype: 'fp16' });
    expect(isBatchError(error, 'UNAVAILABLE')).toBe(true);
    expect((error as Error).message).toContain(
      `dtype 'fp16' needs onnx/model_fp16.onnx` +
        `${spec.task === 'text-generation' ? ' or onnx/decoder_model_merged_fp16.onnx' : ''} in ${twoDtypes}; it has ` +
        'q8 (onnx/model_quantized.onnx), fp32 (onnx/model.onnx)',
    );
    expect((error as Error).message).not.toMatch(/\n\s+at /);
  });

  it('a folder with no loadable file fails ready, saying so', async () => {
    const error = await start({ task: 'text-generation', model: noGraph });
    expect(isBatchError(error, 'UNAVAILABLE')).toBe(true);
    expect((error as Error).message).toBe(
      `Failed to load the text-generation model from "${noGraph}": dtype 'auto' needs ` +
        'onnx/model{_quantized,_int8,_uint8,_q4,_bnb4,,_q4f16,_fp16}.onnx or ' +
        `onnx/decoder_model_merged{_quantized,_int8,_uint8,_q4,_bnb4,,_q4f16,_fp16}.onnx in ${noGraph}; it has no ONNX model`,
    );
  });

  it('a graph whose external data file is missing fails ready, naming it', async () => {
    const lost = join(root, 'lost-data-pool');
    await mkdir(join(lost, 'onnx'), { recursive: true });
    for (const file of ['config.json', 'tokenizer.json', 'onnx/model.onnx']) {
      await copyFile(join(external, file), join(lost, file));
    }
    const error = await start({ task: 'text-generation', model: lost });
    expect(isBatchError(error, 'UNAVAILABLE')).toBe(true);
    expect((error as Error).message).toBe(
      `Failed to load the text-generation model from "${lost}": onnx/model.onnx keeps its weights in ` +
        'onnx/model.onnx_data, which is missing: download it beside the graph',
    );
  });
});
