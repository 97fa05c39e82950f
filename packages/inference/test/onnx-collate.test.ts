import { describe, expect, it } from 'vitest';
import { collate, sequenceAxis, split } from '../src/runners/onnx-collate.js';
import type { CollateOptions, ValueMeta } from '../src/runners/onnx-collate.js';
import type { OnnxTensorData } from '../src/contract/onnx-types.js';

const INPUTS: ValueMeta[] = [
  { name: 'input_ids', type: 'int64', shape: ['batch_size', 'sequence_length'] },
  { name: 'attention_mask', type: 'int64', shape: ['batch_size', 'sequence_length'] },
  { name: 'scale', type: 'float32', shape: ['batch_size', 2] },
];
const RIGHT: CollateOptions = {
  paddingSide: 'right',
  padValues: { input_ids: 9 },
  attentionMaskInput: 'attention_mask',
};

function run(items: unknown[], options = RIGHT) {
  const errors = new Map<number, string>();
  const result = collate(items, INPUTS, options, (index, error) => errors.set(index, (error as Error).message));
  return { result, errors };
}

describe('collate', () => {
  it('pads sequences (pad value per input), generates the mask, and stacks fixed-size inputs', () => {
    const { result, errors } = run([
      { input_ids: [1, 2, 3], scale: [0.5, 1] },
      { input_ids: new BigInt64Array([4n]), scale: new Float32Array([2, 3]) },
    ]);
    expect(errors.size).toBe(0);
    const feeds = result?.collated.feeds;
    expect(feeds?.input_ids).toEqual({
      type: 'int64',
      dims: [2, 3],
      data: BigInt64Array.from([1n, 2n, 3n, 4n, 9n, 9n]),
    });
    expect(feeds?.attention_mask).toEqual({
      type: 'int64',
      dims: [2, 3],
      data: BigInt64Array.from([1n, 1n, 1n, 1n, 0n, 0n]),
    });
    expect(feeds?.scale).toEqual({ type: 'float32', dims: [2, 2], data: Float32Array.from([0.5, 1, 2, 3]) });
    expect(result?.collated.lengths.get('sequence_length')).toEqual([3, 1]);
    expect(result?.indices).toEqual([0, 1]);
  });

  it('pads on the left when asked, and keeps an explicit mask (padding it with 0)', () => {
    const { result } = run(
      [
        { input_ids: [1, 2], attention_mask: [1, 0], scale: [0, 0] },
        { input_ids: [3, 4, 5], scale: [0, 0] },
      ],
      { ...RIGHT, paddingSide: 'left' },
    );
    expect(result?.collated.feeds.input_ids?.data).toEqual(BigInt64Array.from([9n, 1n, 2n, 3n, 4n, 5n]));
    expect(result?.collated.feeds.attention_mask?.data).toEqual(BigInt64Array.from([0n, 1n, 0n, 1n, 1n, 1n]));
  });

  it('rejects bad items one by one and collates the rest', () => {
    const { result, errors } = run([
      { input_ids: [1.5], scale: [0, 0] },
      { input_ids: [1], scale: [0, 0], extra: 1 },
      { scale: [0, 0] },
      { input_ids: [1], scale: [0, 0, 0] },
      { input_ids: [[1], [2, 3]], scale: [0, 0] },
      { input_ids: [7, 8], attention_mask: [1], scale: [0, 0] },
      'text',
      { input_ids: { data: [1, 2], dims: [2] }, scale: { data: [1, 2], dims: [2] } },
    ]);
    expect([...errors]).toEqual([
      [0, 'Input `input_ids` (int64) cannot hold the value 1.5'],
      [1, 'The model has no input `extra`'],
      [2, 'Missing model input `input_ids`'],
      [3, 'Input `scale` must have size 2 on axis 0, got 3'],
      [4, 'Input `input_ids` is a ragged nested array; every row must have the same shape'],
      [5, 'Input `attention_mask` has length 1 but another input sharing its sequence axis has 2'],
      [6, 'Expected an object with one entry per model input'],
    ]);
    expect(result?.indices).toEqual([7]);
    expect(result?.collated.feeds.input_ids?.data).toEqual(BigInt64Array.from([1n, 2n]));
  });

  it('returns undefined when no item is valid', () => {
    expect(run([null]).result).toBeUndefined();
  });

  it('names sequence axes by their symbolic dimension', () => {
    expect(sequenceAxis({ name: 'x', type: 'float32', shape: ['b', 'seq', 4] })).toBe('seq');
    expect(sequenceAxis({ name: 'x', type: 'float32', shape: ['b', -1] })).toBe('#x');
    expect(sequenceAxis({ name: 'x', type: 'float32', shape: ['b', 4] })).toBeUndefined();
    expect(sequenceAxis({ name: 'x', type: 'float32', shape: ['b'] })).toBeUndefined();
  });
});

describe('split', () => {
  const tokens: OnnxTensorData = {
    type: 'float32',
    dims: [2, 3, 2],
    data: Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]),
  };
  const pooled: OnnxTensorData = { type: 'float32', dims: [2, 2], data: Float32Array.from([1, 2, 3, 4]) };

  it('splits along the batch axis and trims padded positions (right padding)', () => {
    const items = split({ tokens, pooled }, 2, new Map([['tokens', [3, 1]]]), 'right');
    expect(items[0]).toEqual({
      tokens: { type: 'float32', dims: [3, 2], data: Float32Array.from([1, 2, 3, 4, 5, 6]) },
      pooled: { type: 'float32', dims: [2], data: Float32Array.from([1, 2]) },
    });
    expect(items[1]?.tokens).toEqual({ type: 'float32', dims: [1, 2], data: Float32Array.from([7, 8]) });
  });

  it('trims from the front with left padding', () => {
    const items = split({ tokens }, 2, new Map([['tokens', [2, 1]]]), 'left');
    expect(items[0]?.tokens?.data).toEqual(Float32Array.from([3, 4, 5, 6]));
    expect(items[1]?.tokens?.data).toEqual(Float32Array.from([11, 12]));
  });

  it('refuses an output without a batch axis', () => {
    expect(() => split({ pooled }, 3, new Map(), 'right')).toThrow(
      'Output `pooled` has 2 rows for a batch of 3; it has no batch axis',
    );
  });
});
