// Builds tiny, fully deterministic ONNX models for the tests. Every embedding value is a multiple of 1/8 and
// small, so sums over any sequence are exact in float32: batched (padded) and one-by-one runs must then agree
// bit for bit whatever order the kernels add in, and expected values can be computed independently in JS.
import { copyFile, mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataType, encodeModel } from '@microbatch/test-kit';
import type { Initializer, NodeSpec, ValueInfo } from '@microbatch/test-kit';
import { TINYSTORIES_DIR } from './paths.js';

export const VOCAB = 2048;
export const DIM = 4;

/** The embedding of token `id`: a deterministic multiple of 1/8 in [-1, 1]. */
export function embeddingOf(id: number): number[] {
  return Array.from({ length: DIM }, (_, d) => (((id * 7 + d * 13) % 17) - 8) / 8);
}

/** The classifier head: logits = (sum of token embeddings) x W / token count. */
export const CLASSIFIER_WEIGHTS: readonly (readonly [number, number])[] = [
  [1, -1],
  [0.5, 0.25],
  [-0.75, 0.5],
  [0.25, 1],
];

const table: Initializer = {
  name: 'embedding_table',
  type: DataType.FLOAT,
  dims: [VOCAB, DIM],
  values: Array.from({ length: VOCAB }, (_, id) => embeddingOf(id)).flat(),
};
const axis1: Initializer = { name: 'axis_1', type: DataType.INT64, dims: [1], values: [1] };
const axis2: Initializer = { name: 'axis_2', type: DataType.INT64, dims: [1], values: [2] };
const tokenInputs: ValueInfo[] = [
  { name: 'input_ids', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] },
  { name: 'attention_mask', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] },
];

/** Nodes shared by every model: masked token embeddings, their sum over the sequence and the token count. */
const maskedSum: NodeSpec[] = [
  { op: 'Gather', inputs: ['embedding_table', 'input_ids'], outputs: ['gathered'], attributes: { axis: 0 } },
  { op: 'Cast', inputs: ['attention_mask'], outputs: ['mask_f'], attributes: { to: DataType.FLOAT } },
  { op: 'Unsqueeze', inputs: ['mask_f', 'axis_2'], outputs: ['mask_3d'] },
  { op: 'Mul', inputs: ['gathered', 'mask_3d'], outputs: ['token_embeddings'] },
  { op: 'ReduceSum', inputs: ['token_embeddings', 'axis_1'], outputs: ['summed'], attributes: { keepdims: 0 } },
  { op: 'ReduceSum', inputs: ['mask_f', 'axis_1'], outputs: ['count'], attributes: { keepdims: 1 } },
];

/** A plain ONNX embedder: `embeddings [B,D]` (masked mean) and `token_embeddings [B,S,D]` (masked). */
export function embedderModel(): Uint8Array {
  return encodeModel({
    inputs: tokenInputs,
    outputs: [
      { name: 'embeddings', type: DataType.FLOAT, shape: ['batch_size', DIM] },
      { name: 'token_embeddings', type: DataType.FLOAT, shape: ['batch_size', 'sequence_length', DIM] },
    ],
    initializers: [table, axis1, axis2],
    nodes: [...maskedSum, { op: 'Div', inputs: ['summed', 'count'], outputs: ['embeddings'] }],
  });
}

function encoderModel(): Uint8Array {
  return encodeModel({
    inputs: tokenInputs,
    outputs: [{ name: 'last_hidden_state', type: DataType.FLOAT, shape: ['batch_size', 'sequence_length', DIM] }],
    initializers: [table],
    nodes: [
      {
        op: 'Gather',
        inputs: ['embedding_table', 'input_ids'],
        outputs: ['last_hidden_state'],
        attributes: { axis: 0 },
      },
    ],
  });
}

function classifierModel(): Uint8Array {
  const weights: Initializer = {
    name: 'classifier_weights',
    type: DataType.FLOAT,
    dims: [DIM, 2],
    values: CLASSIFIER_WEIGHTS.flat(),
  };
  return encodeModel({
    inputs: tokenInputs,
    outputs: [{ name: 'logits', type: DataType.FLOAT, shape: ['batch_size', 2] }],
    initializers: [table, axis1, axis2, weights],
    nodes: [
      ...maskedSum,
      { op: 'MatMul', inputs: ['summed', 'classifier_weights'], outputs: ['summed_logits'] },
      { op: 'Div', inputs: ['summed_logits', 'count'], outputs: ['logits'] },
    ],
  });
}

async function writeTransformersModel(dir: string, config: object, model: Uint8Array): Promise<void> {
  await mkdir(join(dir, 'onnx'), { recursive: true });
  await writeFile(join(dir, 'config.json'), JSON.stringify(config));
  await writeFile(join(dir, 'onnx', 'model.onnx'), model);
  // The tinystories tokenizer gives the tiny models a real vocabulary of VOCAB ids.
  for (const file of ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json']) {
    await copyFile(join(TINYSTORIES_DIR, file), join(dir, file));
  }
}

/** Where {@link buildTestModels} put each model. */
export interface TestModels {
  readonly root: string;
  /** A plain `.onnx` file for the onnxruntime runner. */
  readonly embedderOnnx: string;
  /** transformers.js-layout folders. */
  readonly encoderDir: string;
  readonly classifierDir: string;
}

/** Writes every test model into a fresh temporary folder. */
export async function buildTestModels(): Promise<TestModels> {
  const root = await mkdtemp(join(tmpdir(), 'microbatch-inference-'));
  const embedderOnnx = join(root, 'embedder.onnx');
  await writeFile(embedderOnnx, embedderModel());
  const base = { model_type: 'bert', hidden_size: DIM, vocab_size: VOCAB, max_position_embeddings: 512 };
  const encoderDir = join(root, 'tiny-encoder');
  await writeTransformersModel(encoderDir, { ...base, architectures: ['BertModel'] }, encoderModel());
  const classifierDir = join(root, 'tiny-classifier');
  await writeTransformersModel(
    classifierDir,
    { ...base, architectures: ['BertForSequenceClassification'], id2label: { 0: 'NEGATIVE', 1: 'POSITIVE' } },
    classifierModel(),
  );
  return { root, embedderOnnx, encoderDir, classifierDir };
}
