// A minimal ONNX (protobuf) writer for test models: no python `onnx` package is available here, and ModelProto
// needs only varints, length-delimited fields and little-endian raw tensor data. Field numbers follow onnx.proto3.
import { open, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** ONNX `TensorProto.DataType` values used by the test models. */
export const DataType = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7, BOOL: 9, FLOAT16: 10 } as const;
type DataTypeValue = (typeof DataType)[keyof typeof DataType];

/** A graph input/output: name, element type and shape (numbers are fixed dims, strings symbolic ones). */
export interface ValueInfo {
  readonly name: string;
  readonly type: DataTypeValue;
  readonly shape: ReadonlyArray<number | string>;
}

/** A constant tensor stored in the graph. */
export interface Initializer {
  readonly name: string;
  readonly type: DataTypeValue;
  readonly dims: readonly number[];
  readonly values: ArrayLike<number>;
}

/** One node; `attributes` holds INT / INTS attributes (all the test graphs need). */
export interface NodeSpec {
  readonly op: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly attributes?: Readonly<Record<string, number | readonly number[]>>;
  /** The operator's domain (`com.microsoft` for onnxruntime's contrib operators); the default domain when absent. */
  readonly domain?: string;
}

/** What {@link encodeModel} writes: one graph, default-domain opset. */
export interface ModelSpec {
  readonly inputs: readonly ValueInfo[];
  readonly outputs: readonly ValueInfo[];
  readonly initializers: readonly Initializer[];
  readonly nodes: readonly NodeSpec[];
  /** @default 17 */
  readonly opset?: number;
  /** The model's `producer_name`. @default 'microbatch-test' */
  readonly producer?: string;
  /** @default 'test-graph' */
  readonly graphName?: string;
  /**
   * Keep the weights outside the graph, as exporters do past 2 GB: every initializer of at least 1 KiB goes to this
   * file (named relative to the graph, e.g. `model.onnx_data`), which {@link writeModel} writes beside the graph.
   */
  readonly externalData?: string;
}

/** Where each external initializer's bytes go, and the data file's parts. */
interface ExternalLayout {
  readonly location: string;
  readonly offsets: Map<string, number>;
  readonly parts: Uint8Array[];
}

/** External data starts each tensor on a 64-byte boundary (onnxruntime maps it; aligned reads are cheaper). */
const EXTERNAL_ALIGN = 64;
const EXTERNAL_MIN_BYTES = 1024;

/**
 * Protobuf bytes as a list of parts: scalars and tags go to a small pending buffer, large payloads (raw tensor data)
 * are kept as the caller's own arrays, so a model of hundreds of MB is written without copying it byte by byte.
 */
class Writer {
  readonly #parts: Uint8Array[] = [];
  #pending: number[] = [];
  #length = 0;

  get length(): number {
    return this.#length + this.#pending.length;
  }

  varint(value: number | bigint): this {
    // Negative int64 values are encoded as 10-byte two's complement varints.
    let rest = BigInt.asUintN(64, BigInt(value));
    do {
      const byte = Number(rest & 0x7fn);
      rest >>= 7n;
      this.#pending.push(rest === 0n ? byte : byte | 0x80);
    } while (rest !== 0n);
    return this;
  }

  tag(field: number, wireType: 0 | 2): this {
    return this.varint((field << 3) | wireType);
  }

  int(field: number, value: number): this {
    return this.tag(field, 0).varint(value);
  }

  bytes(field: number, value: Uint8Array): this {
    this.tag(field, 2).varint(value.length);
    return this.#append([value]);
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, build: (writer: Writer) => void): this {
    const inner = new Writer();
    build(inner);
    const parts = inner.parts();
    this.tag(field, 2).varint(inner.length);
    return this.#append(parts);
  }

  #flush(): void {
    if (this.#pending.length === 0) return;
    this.#parts.push(Uint8Array.from(this.#pending));
    this.#length += this.#pending.length;
    this.#pending = [];
  }

  #append(parts: readonly Uint8Array[]): this {
    for (const part of parts) {
      // Small parts are copied into the pending buffer; large ones are kept as they are.
      if (part.length < 4096) for (const byte of part) this.#pending.push(byte);
      else {
        this.#flush();
        this.#parts.push(part);
        this.#length += part.length;
      }
    }
    return this;
  }

  parts(): Uint8Array[] {
    this.#flush();
    return this.#parts;
  }
}

/** A float's nearest float16 (round half to even), as its 16 bits; Node 20 has no `Float16Array`. */
export function halfBits(value: number): number {
  const word = new Uint32Array(Float32Array.of(value).buffer)[0] as number;
  const sign = (word >>> 16) & 0x8000;
  const exponent = ((word >>> 23) & 0xff) - 127 + 15;
  let mantissa = word & 0x7fffff;
  if (exponent >= 31) return sign | 0x7c00 | (Number.isNaN(value) ? 0x200 : 0);
  let shift = 13;
  let base = exponent << 10;
  if (exponent <= 0) {
    // A subnormal half: the implicit bit joins the mantissa, shifted further.
    if (exponent < -10) return sign;
    mantissa |= 0x800000;
    shift = 14 - exponent;
    base = 0;
  }
  const kept = mantissa >>> shift;
  const rest = mantissa & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  // A carry out of the mantissa moves into the exponent, as rounding up should.
  return sign | (base + kept + (rest > half || (rest === half && (kept & 1) === 1) ? 1 : 0));
}

function rawData(type: DataTypeValue, values: ArrayLike<number>): Uint8Array {
  if (type === DataType.FLOAT16) return new Uint8Array(Uint16Array.from(values, halfBits).buffer);
  if (type === DataType.FLOAT) {
    const floats = values instanceof Float32Array ? values : Float32Array.from(values);
    return new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);
  }
  if (type === DataType.INT32) return new Uint8Array(Int32Array.from(values).buffer);
  if (type === DataType.BOOL) return Uint8Array.from(values, (value) => (value === 0 ? 0 : 1));
  if (type === DataType.UINT8) return Uint8Array.from(values);
  if (type === DataType.INT8) return new Uint8Array(Int8Array.from(values).buffer);
  return new Uint8Array(BigInt64Array.from(Array.from(values, (value) => BigInt(value))).buffer);
}

function writeValueInfo(writer: Writer, info: ValueInfo): void {
  writer.string(1, info.name).message(2, (type) =>
    type.message(1, (tensor) =>
      tensor.int(1, info.type).message(2, (shape) => {
        for (const dim of info.shape) {
          shape.message(1, (d) => (typeof dim === 'number' ? d.int(1, dim) : d.string(2, dim)));
        }
      }),
    ),
  );
}

function writeNode(writer: Writer, node: NodeSpec, index: number): void {
  for (const input of node.inputs) writer.string(1, input);
  for (const output of node.outputs) writer.string(2, output);
  writer.string(3, `${node.op}_${index}`).string(4, node.op);
  if (node.domain !== undefined) writer.string(7, node.domain);
  for (const [name, value] of Object.entries(node.attributes ?? {})) {
    writer.message(5, (attribute) => {
      attribute.string(1, name);
      if (typeof value === 'number') attribute.int(3, value).int(20, 2);
      else {
        for (const item of value) attribute.int(8, item);
        attribute.int(20, 7);
      }
    });
  }
}

/**
 * Encodes a model as ONNX protobuf bytes (IR version 8), as a list of parts to write one after the other: raw tensor
 * data is not copied (a large model is written with {@link writeModel}).
 *
 * @example
 * ```ts
 * const parts = encodeModelParts({ inputs, outputs, initializers, nodes });
 * ```
 */
export function encodeModelParts(spec: ModelSpec): Uint8Array[] {
  return encodeGraph(spec, externalLayout(spec));
}

/** Lays the large initializers of a spec with `externalData` out in its data file; undefined without. */
function externalLayout(spec: ModelSpec): ExternalLayout | undefined {
  if (spec.externalData === undefined) return undefined;
  const layout: ExternalLayout = { location: spec.externalData, offsets: new Map(), parts: [] };
  let offset = 0;
  for (const init of spec.initializers) {
    const data = rawData(init.type, init.values);
    if (data.length < EXTERNAL_MIN_BYTES) continue;
    const pad = (EXTERNAL_ALIGN - (offset % EXTERNAL_ALIGN)) % EXTERNAL_ALIGN;
    if (pad > 0) layout.parts.push(new Uint8Array(pad));
    offset += pad;
    layout.offsets.set(init.name, offset);
    layout.parts.push(data);
    offset += data.length;
  }
  return layout;
}

function encodeGraph(spec: ModelSpec, external: ExternalLayout | undefined): Uint8Array[] {
  const model = new Writer();
  model.int(1, 8).string(2, spec.producer ?? 'microbatch-test');
  model.message(7, (graph) => {
    spec.nodes.forEach((node, index) => graph.message(1, (writer) => writeNode(writer, node, index)));
    graph.string(2, spec.graphName ?? 'test-graph');
    for (const init of spec.initializers) {
      graph.message(5, (tensor) => {
        for (const dim of init.dims) tensor.int(1, dim);
        tensor.int(2, init.type).string(8, init.name);
        const offset = external?.offsets.get(init.name);
        const data = rawData(init.type, init.values);
        if (external === undefined || offset === undefined) tensor.bytes(9, data);
        else {
          // TensorProto.external_data (13): location / offset / length entries; data_location (14) EXTERNAL.
          const entry = (key: string, value: string) =>
            tensor.message(13, (pair) => pair.string(1, key).string(2, value));
          entry('location', external.location);
          entry('offset', String(offset));
          entry('length', String(data.length));
          tensor.int(14, 1);
        }
      });
    }
    for (const input of spec.inputs) graph.message(11, (writer) => writeValueInfo(writer, input));
    for (const output of spec.outputs) graph.message(12, (writer) => writeValueInfo(writer, output));
  });
  model.message(8, (opset) => opset.string(1, '').int(2, spec.opset ?? 17));
  // Each other domain a node uses, at version 1 (onnxruntime's contrib operators).
  for (const domain of new Set(spec.nodes.flatMap((node) => (node.domain === undefined ? [] : [node.domain])))) {
    model.message(8, (opset) => opset.string(1, domain).int(2, 1));
  }
  return model.parts();
}

/**
 * Encodes a model as ONNX protobuf bytes (IR version 8).
 *
 * @example
 * ```ts
 * await writeFile('model.onnx', encodeModel({ inputs, outputs, initializers, nodes }));
 * ```
 */
export function encodeModel(spec: ModelSpec): Uint8Array {
  return Buffer.concat(encodeModelParts(spec));
}

/**
 * Writes a model to `path` part by part (no copy of its weights into one buffer), under a temporary name first, so
 * an interrupted run never leaves a truncated model behind; with `externalData`, its data file beside it too.
 * Returns the graph file's size in bytes.
 *
 * @example
 * ```ts
 * await writeModel('onnx/model.onnx', { inputs, outputs, initializers, nodes });
 * ```
 */
export async function writeModel(path: string, spec: ModelSpec): Promise<number> {
  const external = externalLayout(spec);
  // The data file first: a graph is never left behind without the weights it names.
  if (external !== undefined) await writeParts(join(dirname(path), external.location), external.parts);
  return writeParts(path, encodeGraph(spec, external));
}

/** Writes parts to `path` under a temporary name first, then renames it; returns the bytes written. */
async function writeParts(path: string, parts: readonly Uint8Array[]): Promise<number> {
  const partial = `${path}.${process.pid}.partial`;
  const file = await open(partial, 'w');
  let size = 0;
  try {
    for (const part of parts) {
      await file.write(part);
      size += part.length;
    }
  } finally {
    await file.close();
  }
  await rename(partial, path);
  return size;
}
