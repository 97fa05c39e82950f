// The one place the decode loop reads float16 as numbers: a fp16 export's logits, which the sampler needs as
// float32. Its KV cache is never converted: the loop copies it as float16 bits (`KvArray`).
import type { Tensor } from 'onnxruntime-node';

/** float32 value of each of the 65,536 float16 bit patterns, built on first use (256 KiB). */
let table: Float32Array | undefined;

function halfTable(): Float32Array {
  if (table !== undefined) return table;
  table = new Float32Array(65_536);
  for (let bits = 0; bits < 65_536; bits += 1) {
    const sign = bits & 0x8000 ? -1 : 1;
    const exponent = (bits >> 10) & 0x1f;
    const mantissa = bits & 0x3ff;
    table[bits] =
      exponent === 0
        ? sign * mantissa * 2 ** -24
        : exponent === 0x1f
          ? mantissa === 0
            ? sign * Number.POSITIVE_INFINITY
            : Number.NaN
          : sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
  }
  return table;
}

/**
 * A run's logits as float32: as they are from a float32 graph, converted from a float16 one's bits.
 *
 * @example
 * ```ts
 * const logits = logitsOf(outputs.logits);
 * ```
 */
export function logitsOf(tensor: Tensor | undefined): Float32Array {
  const data = tensor?.data;
  if (!(data instanceof Uint16Array)) return data as Float32Array;
  const values = halfTable();
  return Float32Array.from(data, (bits) => values[bits] as number);
}
