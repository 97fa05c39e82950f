// float16 logits read as float32 (an fp16 export's): every class of bit pattern, and float32 logits untouched.
import { Tensor } from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { logitsOf } from '../src/runners/continuous/half-float.js';

describe('logitsOf', () => {
  it('converts float16 bits: normal, negative, subnormal, zero, infinity and NaN', () => {
    const bits = Uint16Array.of(0x3c00, 0xc000, 0x3555, 0x0001, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7bff);
    const values = Array.from(logitsOf(new Tensor('float16', bits, [bits.length])));
    expect(values.slice(0, 2)).toEqual([1, -2]);
    expect(values[2]).toBeCloseTo(1 / 3, 3);
    expect(values.slice(3, 9)).toEqual([2 ** -24, 0, -0, Infinity, -Infinity, Number.NaN]);
    expect(values[9]).toBe(65_504);
  });

  it('returns float32 logits as they are', () => {
    const data = Float32Array.of(0.5, -1);
    expect(logitsOf(new Tensor('float32', data, [2]))).toBe(data);
  });
});
