// Turns per-item records of named inputs into batched tensors and batched outputs back into per-item values.
// Pure (no onnxruntime import), so it is unit-tested directly. Axis words: "model axis" counts the batch axis,
// "item axis" does not (item axis 0 = model axis 1, the sequence axis of token models).
import { InputError } from '../contract/errors.js';
import type { OnnxTensorData, OnnxTypedArray } from '../contract/onnx-types.js';

/** What the runner knows about one model input or output. */
export interface ValueMeta {
  readonly name: string;
  readonly type: string;
  /** With the batch axis; numbers are fixed sizes, strings symbolic (dynamic) ones; empty when unknown. */
  readonly shape: ReadonlyArray<number | string>;
}

/** How items are padded. */
export interface CollateOptions {
  readonly paddingSide: 'left' | 'right';
  readonly padValues: Readonly<Record<string, number>>;
  readonly attentionMaskInput: string;
}

/** A batch ready for `session.run`, and what splitting its outputs needs. */
export interface Collated {
  readonly feeds: Readonly<Record<string, OnnxTensorData>>;
  /** Per sequence dimension name, each collated item's length along it. */
  readonly lengths: ReadonlyMap<string, readonly number[]>;
  /** The sequence dimension of the attention mask (or of the first padded input). */
  readonly primaryAxis: string | undefined;
}

type Scalar = number | bigint | boolean;
interface Value {
  readonly values: Scalar[];
  readonly dims: number[];
}

const TYPED: Record<string, new (length: number) => OnnxTypedArray> = {
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};

/** The name of an input's padded (sequence) dimension, or `undefined` when model axis 1 is fixed or absent. */
export function sequenceAxis(meta: ValueMeta): string | undefined {
  const dim = meta.shape[1];
  if (meta.shape.length < 2 || (typeof dim === 'number' && dim >= 0)) return undefined;
  return typeof dim === 'string' && dim.length > 0 ? dim : `#${meta.name}`;
}

/** Whether a model input's element type can be fed from numbers. */
export function isSupportedType(type: string): boolean {
  return type in TYPED;
}

function isArrayLike(value: unknown): value is ArrayLike<unknown> {
  return (Array.isArray(value) || ArrayBuffer.isView(value)) && !(value instanceof DataView);
}

function normalize(name: string, value: unknown): Value {
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean')
    return { values: [value], dims: [] };
  if (isArrayLike(value)) {
    const first = value[0];
    if (value.length > 0 && isArrayLike(first)) {
      const children = Array.from(value, (child) => normalize(name, child));
      const dims = (children[0] as Value).dims;
      if (children.some((child) => child.dims.join() !== dims.join())) {
        throw new InputError(name, `Input \`${name}\` is a ragged nested array; every row must have the same shape`);
      }
      return { values: children.flatMap((child) => child.values), dims: [value.length, ...dims] };
    }
    const values = Array.from(value);
    if (values.some((v) => typeof v !== 'number' && typeof v !== 'bigint' && typeof v !== 'boolean')) {
      throw new InputError(name, `Input \`${name}\` must contain only numbers, bigints or booleans`);
    }
    return { values: values as Scalar[], dims: [values.length] };
  }
  if (typeof value === 'object' && value !== null && 'data' in value && 'dims' in value) {
    const { data, dims } = value;
    if (!isArrayLike(data) || !Array.isArray(dims) || dims.some((d) => !Number.isInteger(d) || d < 0)) {
      throw new InputError(name, `Input \`${name}\` must have array \`data\` and non-negative integer \`dims\``);
    }
    const size = (dims as number[]).reduce((product, d) => product * d, 1);
    if (size !== data.length) {
      throw new InputError(
        name,
        `Input \`${name}\` has ${data.length} values but dims [${dims.join(', ')}] need ${size}`,
      );
    }
    return { values: normalize(name, Array.from(data)).values, dims: [...(dims as number[])] };
  }
  throw new InputError(name, `Input \`${name}\` must be a number, an array, a typed array or { data, dims }`);
}

function checkElements(meta: ValueMeta, value: Value): void {
  const integer = meta.type !== 'float32' && meta.type !== 'float64';
  for (const v of value.values) {
    const ok =
      typeof v === 'boolean' || typeof v === 'bigint'
        ? integer
        : Number.isFinite(v) && (!integer || Number.isInteger(v));
    if (!ok)
      throw new InputError(meta.name, `Input \`${meta.name}\` (${meta.type}) cannot hold the value ${String(v)}`);
  }
}

/** Checks one item against the model inputs; returns its values and its length per sequence dimension. */
function checkItem(item: unknown, inputs: readonly ValueMeta[], maskName: string | undefined) {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) {
    throw new InputError(undefined, 'Expected an object with one entry per model input');
  }
  const record = item as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!inputs.some((meta) => meta.name === key)) throw new InputError(key, `The model has no input \`${key}\``);
  }
  const values = new Map<string, Value>();
  const lengths = new Map<string, number>();
  for (const meta of inputs) {
    if (record[meta.name] === undefined) {
      if (meta.name === maskName) continue;
      throw new InputError(meta.name, `Missing model input \`${meta.name}\``);
    }
    const value = normalize(meta.name, record[meta.name]);
    checkElements(meta, value);
    if (meta.shape.length > 0) {
      if (value.dims.length !== meta.shape.length - 1) {
        throw new InputError(
          meta.name,
          `Input \`${meta.name}\` must have ${meta.shape.length - 1} dimensions (without the batch axis), got ${value.dims.length}`,
        );
      }
      meta.shape.slice(1).forEach((dim, axis) => {
        if (typeof dim === 'number' && dim >= 0 && value.dims[axis] !== dim) {
          throw new InputError(
            meta.name,
            `Input \`${meta.name}\` must have size ${dim} on axis ${axis}, got ${value.dims[axis]}`,
          );
        }
      });
    }
    const axis = sequenceAxis(meta);
    if (axis !== undefined) {
      const length = value.dims[0] as number;
      if (lengths.has(axis) && lengths.get(axis) !== length) {
        throw new InputError(
          meta.name,
          `Input \`${meta.name}\` has length ${length} but another input sharing its sequence axis has ${lengths.get(axis)}`,
        );
      }
      lengths.set(axis, length);
    }
    values.set(meta.name, value);
  }
  return { values, lengths };
}

/**
 * Collates items into one batch: variable-length sequence axes are padded (`padValues`, then 0) and the
 * attention mask is generated for items that do not give one. Bad items are reported through `reject`
 * and left out; the returned `indices` are the items that made it.
 */
export function collate(
  items: readonly unknown[],
  inputs: readonly ValueMeta[],
  options: CollateOptions,
  reject: (index: number, error: unknown) => void,
): { readonly collated: Collated; readonly indices: readonly number[] } | undefined {
  const maskMeta = inputs.find((meta) => meta.name === options.attentionMaskInput);
  const primaryAxis =
    (maskMeta && sequenceAxis(maskMeta)) ?? inputs.map(sequenceAxis).find((axis) => axis !== undefined);
  const accepted: { index: number; values: Map<string, Value>; lengths: Map<string, number> }[] = [];
  items.forEach((item, index) => {
    try {
      const checked = checkItem(item, inputs, maskMeta?.name);
      if (maskMeta !== undefined && !checked.values.has(maskMeta.name)) {
        const length = primaryAxis === undefined ? undefined : checked.lengths.get(primaryAxis);
        if (length === undefined)
          throw new InputError(maskMeta.name, `Cannot infer \`${maskMeta.name}\`; give it explicitly`);
        checked.values.set(maskMeta.name, { values: new Array<number>(length).fill(1), dims: [length] });
      }
      const reference = accepted[0];
      for (const meta of inputs) {
        const fixed = reference?.values
          .get(meta.name)
          ?.dims.slice(sequenceAxis(meta) === undefined ? 0 : 1)
          .join();
        const own = checked.values
          .get(meta.name)
          ?.dims.slice(sequenceAxis(meta) === undefined ? 0 : 1)
          .join();
        if (fixed !== undefined && fixed !== own) {
          throw new InputError(
            meta.name,
            `Input \`${meta.name}\` has dims that differ from the rest of the batch on a non-sequence axis`,
          );
        }
      }
      accepted.push({ index, ...checked });
    } catch (error) {
      reject(index, error);
    }
  });
  if (accepted.length === 0) return undefined;
  const feeds: Record<string, OnnxTensorData> = {};
  for (const meta of inputs) {
    const Typed = TYPED[meta.type];
    if (Typed === undefined)
      throw new TypeError(`Model input \`${meta.name}\` has unsupported element type ${meta.type}`);
    const parts = accepted.map((item) => item.values.get(meta.name) as Value);
    const padded = sequenceAxis(meta) !== undefined;
    const length = padded
      ? Math.max(...parts.map((part) => part.dims[0] as number))
      : ((parts[0] as Value).dims[0] ?? 1);
    const inner = (parts[0] as Value).dims.slice(1).reduce((product, d) => product * d, 1);
    const rowSize = padded ? length * inner : (parts[0] as Value).values.length;
    const data = new Typed(rowSize * parts.length);
    const big = data instanceof BigInt64Array || data instanceof BigUint64Array;
    const convert = (v: Scalar) => (big ? BigInt(typeof v === 'boolean' ? Number(v) : v) : Number(v));
    const pad = meta.name === maskMeta?.name ? 0 : (options.padValues[meta.name] ?? 0);
    parts.forEach((part, row) => {
      if (padded) (data as unknown as Scalar[]).fill(convert(pad), row * rowSize, (row + 1) * rowSize);
      const shift = padded && options.paddingSide === 'left' ? rowSize - part.values.length : 0;
      part.values.forEach((v, k) => {
        (data as unknown as Scalar[])[row * rowSize + shift + k] = convert(v);
      });
    });
    const dims = padded
      ? [parts.length, length, ...(parts[0] as Value).dims.slice(1)]
      : [parts.length, ...(parts[0] as Value).dims];
    feeds[meta.name] = { type: meta.type, dims, data };
  }
  const lengths = new Map<string, number[]>();
  for (const item of accepted) {
    for (const [axis, length] of item.lengths) lengths.set(axis, [...(lengths.get(axis) ?? []), length]);
  }
  return { collated: { feeds, lengths, primaryAxis }, indices: accepted.map((item) => item.index) };
}

/**
 * Splits batched outputs into per-item values along axis 0; outputs in `trim` (name to sequence dimension) have
 * their model axis 1 cut back from the padded length to each item's length.
 */
export function split(
  outputs: Readonly<Record<string, OnnxTensorData>>,
  count: number,
  trim: ReadonlyMap<string, readonly number[]>,
  paddingSide: 'left' | 'right',
): Record<string, OnnxTensorData>[] {
  const items: Record<string, OnnxTensorData>[] = Array.from({ length: count }, () => ({}));
  for (const [name, tensor] of Object.entries(outputs)) {
    if (tensor.dims[0] !== count) {
      throw new Error(`Output \`${name}\` has ${tensor.dims[0]} rows for a batch of ${count}; it has no batch axis`);
    }
    const itemDims = tensor.dims.slice(1);
    const rowSize = itemDims.reduce((product, d) => product * d, 1);
    const lengths = itemDims.length > 0 ? trim.get(name) : undefined;
    const inner = itemDims.slice(1).reduce((product, d) => product * d, 1);
    items.forEach((item, row) => {
      let start = row * rowSize;
      let end = start + rowSize;
      let dims = itemDims;
      const length = lengths?.[row];
      if (length !== undefined) {
        const padding = (itemDims[0] as number) - length;
        if (paddingSide === 'left') start += padding * inner;
        end = start + length * inner;
        dims = [length, ...itemDims.slice(1)];
      }
      item[name] = { type: tensor.type, dims, data: tensor.data.slice(start, end) };
    });
  }
  return items;
}
