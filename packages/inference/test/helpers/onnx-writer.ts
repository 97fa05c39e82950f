// A minimal ONNX (protobuf) writer for test models: no python `onnx` package is available here, and ModelProto
// needs only varints, length-delimited fields and little-endian raw tensor data. Field numbers follow onnx.proto3.

/** ONNX `TensorProto.DataType` values used by the test models. */
export const DataType = { FLOAT: 1, INT32: 6, INT64: 7 } as const;
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
}

/** What {@link encodeModel} writes: one graph, default-domain opset. */
export interface ModelSpec {
  readonly inputs: readonly ValueInfo[];
  readonly outputs: readonly ValueInfo[];
  readonly initializers: readonly Initializer[];
  readonly nodes: readonly NodeSpec[];
  /** @default 17 */
  readonly opset?: number;
}

class Writer {
  readonly #bytes: number[] = [];

  varint(value: number | bigint): this {
    // Negative int64 values are encoded as 10-byte two's complement varints.
    let rest = BigInt.asUintN(64, BigInt(value));
    do {
      const byte = Number(rest & 0x7fn);
      rest >>= 7n;
      this.#bytes.push(rest === 0n ? byte : byte | 0x80);
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
    for (const byte of value) this.#bytes.push(byte);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, build: (writer: Writer) => void): this {
    const inner = new Writer();
    build(inner);
    return this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.#bytes);
  }
}

function rawData(type: DataTypeValue, values: ArrayLike<number>): Uint8Array {
  if (type === DataType.FLOAT) return new Uint8Array(Float32Array.from(values).buffer);
  if (type === DataType.INT32) return new Uint8Array(Int32Array.from(values).buffer);
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
 * Encodes a model as ONNX protobuf bytes (IR version 8).
 *
 * @example
 * ```ts
 * await writeFile('model.onnx', encodeModel({ inputs, outputs, initializers, nodes }));
 * ```
 */
export function encodeModel(spec: ModelSpec): Uint8Array {
  const model = new Writer();
  model.int(1, 8).string(2, 'microbatch-test');
  model.message(7, (graph) => {
    spec.nodes.forEach((node, index) => graph.message(1, (writer) => writeNode(writer, node, index)));
    graph.string(2, 'test-graph');
    for (const init of spec.initializers) {
      graph.message(5, (tensor) => {
        for (const dim of init.dims) tensor.int(1, dim);
        tensor.int(2, init.type).string(8, init.name).bytes(9, rawData(init.type, init.values));
      });
    }
    for (const input of spec.inputs) graph.message(11, (writer) => writeValueInfo(writer, input));
    for (const output of spec.outputs) graph.message(12, (writer) => writeValueInfo(writer, output));
  });
  model.message(8, (opset) => opset.string(1, '').int(2, spec.opset ?? 17));
  return model.finish();
}
