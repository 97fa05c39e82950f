// The ONNX model of the embeddings workload: token embeddings, a stack of residual feed-forward blocks
// over [seq, hidden] and a masked mean pool. It is written from JS with the inference tests' ONNX writer (no python
// `onnx` here) and is big enough that a batch costs real matmul time, so the benchmark measures the model, not HTTP.
import { DataType, encodeModel } from '@microbatch/test-kit';
import type { Initializer, NodeSpec } from '@microbatch/test-kit';
import { seededRandom } from '@microbatch/core/util';

/** Shape of the generated model; part of its file name, so a change builds a new file. */
export interface EmbedderShape {
  /** Token ids: hashed words (see `wordIds` in workloads.ts); id 0 is padding. */
  readonly vocab: number;
  readonly hidden: number;
  readonly ffn: number;
  readonly layers: number;
}

export const EMBEDDER_SHAPE: EmbedderShape = { vocab: 4096, hidden: 256, ffn: 1024, layers: 4 };

/** A deterministic uniform generator on [-1, 1): the same file every time. */
function uniform(seed: number): () => number {
  const random = seededRandom(seed);
  return () => random() * 2 - 1;
}

function weights(name: string, rows: number, cols: number, seed: number): Initializer {
  const next = uniform(seed);
  // Scaled by 1/sqrt(fan-in) so activations stay O(1) through the residual stack.
  const scale = 1 / Math.sqrt(rows);
  return {
    name,
    type: DataType.FLOAT,
    dims: [rows, cols],
    values: Float32Array.from({ length: rows * cols }, () => next() * scale),
  };
}

/** The model's file name for a shape. */
export function embedderFileName(shape: EmbedderShape = EMBEDDER_SHAPE): string {
  return `embedder-v${shape.vocab}-h${shape.hidden}-f${shape.ffn}-l${shape.layers}.onnx`;
}

/**
 * Encodes the embedder: `input_ids`, `attention_mask` [batch, sequence] (int64) → `embeddings` [batch, hidden].
 * Each block is h = h + relu(h·W1)·W2; padding positions are masked out of the mean.
 */
export function embedderModel(shape: EmbedderShape = EMBEDDER_SHAPE): Uint8Array {
  const initializers: Initializer[] = [
    weights('token_table', shape.vocab, shape.hidden, 1),
    { name: 'axis_1', type: DataType.INT64, dims: [1], values: [1] },
    { name: 'axis_2', type: DataType.INT64, dims: [1], values: [2] },
  ];
  const nodes: NodeSpec[] = [
    { op: 'Gather', inputs: ['token_table', 'input_ids'], outputs: ['h0'], attributes: { axis: 0 } },
  ];
  for (let layer = 0; layer < shape.layers; layer += 1) {
    const [w1, w2] = [`w1_${layer}`, `w2_${layer}`];
    initializers.push(
      weights(w1, shape.hidden, shape.ffn, 100 + 2 * layer),
      weights(w2, shape.ffn, shape.hidden, 101 + 2 * layer),
    );
    nodes.push(
      { op: 'MatMul', inputs: [`h${layer}`, w1], outputs: [`up_${layer}`] },
      { op: 'Relu', inputs: [`up_${layer}`], outputs: [`act_${layer}`] },
      { op: 'MatMul', inputs: [`act_${layer}`, w2], outputs: [`down_${layer}`] },
      { op: 'Add', inputs: [`h${layer}`, `down_${layer}`], outputs: [`h${layer + 1}`] },
    );
  }
  nodes.push(
    { op: 'Cast', inputs: ['attention_mask'], outputs: ['mask_f'], attributes: { to: DataType.FLOAT } },
    { op: 'Unsqueeze', inputs: ['mask_f', 'axis_2'], outputs: ['mask_3d'] },
    { op: 'Mul', inputs: [`h${shape.layers}`, 'mask_3d'], outputs: ['masked'] },
    { op: 'ReduceSum', inputs: ['masked', 'axis_1'], outputs: ['summed'], attributes: { keepdims: 0 } },
    { op: 'ReduceSum', inputs: ['mask_f', 'axis_1'], outputs: ['count'], attributes: { keepdims: 1 } },
    { op: 'Div', inputs: ['summed', 'count'], outputs: ['embeddings'] },
  );
  return encodeModel({
    inputs: [
      { name: 'input_ids', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] },
      { name: 'attention_mask', type: DataType.INT64, shape: ['batch_size', 'sequence_length'] },
    ],
    outputs: [{ name: 'embeddings', type: DataType.FLOAT, shape: ['batch_size', shape.hidden] }],
    initializers,
    nodes,
  });
}
