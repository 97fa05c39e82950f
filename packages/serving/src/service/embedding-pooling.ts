import type { OnnxTensorData } from '@microbatch/inference';

/**
 * How token vectors become one embedding: the mean over the input's tokens, the first token (`[CLS]`), or the last.
 *
 * @example
 * ```ts
 * const pooling: Pooling = 'mean';
 * ```
 */
export type Pooling = 'mean' | 'cls' | 'last_token';

/** The poolings, as options and queue entries may name them. */
export const POOLINGS: readonly Pooling[] = ['mean', 'cls', 'last_token'];

/**
 * Pools one input's `last_hidden_state` (`[tokens, dims]`, its padding already cut off by the batch runner, so the
 * mean covers exactly the attended tokens) and, with `normalize`, scales it to unit length.
 *
 * @example
 * ```ts
 * poolEmbedding({ type: 'float32', dims: [2, 2], data: Float32Array.of(1, 0, 0, 1) }, 2, 'mean', false); // [0.5, 0.5]
 * ```
 */
export function poolEmbedding(
  hidden: OnnxTensorData,
  dimensions: number,
  pooling: Pooling,
  normalize: boolean,
): Float32Array {
  const data = hidden.data as Float32Array;
  const tokens = hidden.dims[0] ?? 0;
  if (hidden.dims.length !== 2 || hidden.dims[1] !== dimensions || tokens < 1) {
    throw new Error(`Expected last_hidden_state of [tokens, ${dimensions}], got [${hidden.dims.join(', ')}]`);
  }
  const out = new Float32Array(dimensions);
  if (pooling === 'mean') {
    const sums = new Float64Array(dimensions);
    for (let token = 0; token < tokens; token += 1) {
      for (let d = 0; d < dimensions; d += 1) sums[d] = (sums[d] as number) + (data[token * dimensions + d] as number);
    }
    for (let d = 0; d < dimensions; d += 1) out[d] = (sums[d] as number) / tokens;
  } else {
    const token = pooling === 'cls' ? 0 : tokens - 1;
    out.set(data.subarray(token * dimensions, (token + 1) * dimensions));
  }
  return normalize ? normalized(out) : out;
}

/** `vector` scaled to unit L2 length (a zero vector stays zero), in place. */
export function normalized(vector: Float32Array): Float32Array {
  let sum = 0;
  for (const value of vector) sum += value * value;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let d = 0; d < vector.length; d += 1) vector[d] = (vector[d] as number) / norm;
  return vector;
}
