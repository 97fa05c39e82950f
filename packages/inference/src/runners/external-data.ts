// The external data files an ONNX graph names: a graph over 2 GB (or any exporter's `save_as_external_data`) keeps
// its weights in `model.onnx_data` beside it. onnxruntime opens them only while creating the session, and reports a
// missing one as a failed protobuf load; reading their names first lets the worker name the missing file instead.
// The graph is walked field by field with positioned reads, so a graph that holds its own (gigabytes of) weights is
// skipped over, never read into memory.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/** Buffered positioned reads of one file: the protobuf walk reads small fields at increasing offsets. */
export class FileBytes {
  readonly #fd: number;
  readonly #buffer = Buffer.alloc(1 << 16);
  #start = 0;
  #end = 0;

  constructor(fd: number) {
    this.#fd = fd;
  }

  byte(position: number): number {
    if (position < this.#start || position >= this.#end) {
      this.#start = position;
      this.#end = position + readSync(this.#fd, this.#buffer, 0, this.#buffer.length, position);
      if (position >= this.#end) throw new Error('truncated ONNX file');
    }
    return this.#buffer[position - this.#start] as number;
  }

  text(position: number, length: number): string {
    const bytes = Buffer.alloc(length);
    readSync(this.#fd, bytes, 0, length, position);
    return bytes.toString('utf8');
  }
}

/** One protobuf field: its number, wire type, and where its value starts and ends (a varint's value too). */
export interface Field {
  readonly field: number;
  readonly wire: number;
  readonly start: number;
  readonly end: number;
}

/** The fields between `start` and `end`, each length-delimited one skipped over, never read. */
export function* fields(bytes: FileBytes, start: number, end: number): Generator<Field> {
  let position = start;
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = bytes.byte(position++);
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  };
  while (position < end) {
    const key = varint();
    const wire = key & 7;
    const field = Math.floor(key / 8);
    const valueStart = position;
    if (wire === 0) varint();
    else if (wire === 1) position += 8;
    else if (wire === 5) position += 4;
    else if (wire === 2) {
      const length = varint();
      yield { field, wire, start: position, end: position + length };
      position += length;
      continue;
    } else throw new Error(`unsupported protobuf wire type ${wire}`);
    yield { field, wire, start: valueStart, end: position };
  }
}

// Field numbers of onnx.proto3.
export const MODEL_GRAPH = 7;
const GRAPH_NODE = 1;
const GRAPH_INITIALIZER = 5;
const NODE_ATTRIBUTE = 5;
const ATTRIBUTE_TENSOR = 5;
const ATTRIBUTE_GRAPH = 6;
const ATTRIBUTE_TENSORS = 10;
const ATTRIBUTE_GRAPHS = 11;
const TENSOR_EXTERNAL_DATA = 13;

function tensorLocation(bytes: FileBytes, tensor: Field, into: Set<string>): void {
  for (const entry of fields(bytes, tensor.start, tensor.end)) {
    if (entry.field !== TENSOR_EXTERNAL_DATA || entry.wire !== 2) continue;
    let key = '';
    let value = '';
    for (const part of fields(bytes, entry.start, entry.end)) {
      if (part.wire !== 2) continue;
      if (part.field === 1) key = bytes.text(part.start, part.end - part.start);
      else if (part.field === 2) value = bytes.text(part.start, part.end - part.start);
    }
    if (key === 'location' && value !== '') into.add(value);
  }
}

/** Collects the locations of a graph's initializers and of its nodes' tensors and subgraphs (an `If`'s branches). */
function graphLocations(bytes: FileBytes, graph: Field, into: Set<string>): void {
  for (const part of fields(bytes, graph.start, graph.end)) {
    if (part.wire !== 2) continue;
    if (part.field === GRAPH_INITIALIZER) tensorLocation(bytes, part, into);
    else if (part.field === GRAPH_NODE) {
      for (const attribute of fields(bytes, part.start, part.end)) {
        if (attribute.field !== NODE_ATTRIBUTE || attribute.wire !== 2) continue;
        for (const value of fields(bytes, attribute.start, attribute.end)) {
          if (value.wire !== 2) continue;
          if (value.field === ATTRIBUTE_TENSOR || value.field === ATTRIBUTE_TENSORS) tensorLocation(bytes, value, into);
          else if (value.field === ATTRIBUTE_GRAPH || value.field === ATTRIBUTE_GRAPHS)
            graphLocations(bytes, value, into);
        }
      }
    }
  }
}

/**
 * The external data files an ONNX graph's tensors name (`location`, relative to the graph's folder), each once;
 * empty for a graph that holds its weights.
 *
 * @example
 * ```ts
 * externalDataFiles('models/llama/onnx/model.onnx'); // ['model.onnx_data']
 * ```
 */
export function externalDataFiles(path: string): string[] {
  const fd = openSync(path, 'r');
  try {
    const bytes = new FileBytes(fd);
    const { size } = fstatSync(fd);
    const locations = new Set<string>();
    for (const part of fields(bytes, 0, size)) {
      if (part.field === MODEL_GRAPH && part.wire === 2) graphLocations(bytes, part, locations);
    }
    return [...locations];
  } finally {
    closeSync(fd);
  }
}
