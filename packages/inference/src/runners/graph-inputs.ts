// The input names of an ONNX graph, read from its header fields with the same positioned protobuf walk as the
// external data check (`external-data.ts`): the weights are skipped over, never read, so a main thread can ask at
// start-up whether a decoder has the KV cache the continuous loop drives, before any worker loads it.
import { closeSync, constants, fstatSync, openSync } from 'node:fs';
import { FileBytes, MODEL_GRAPH, fields } from './external-data.js';

// Field numbers of onnx.proto3: GraphProto.input, ValueInfoProto.name.
const GRAPH_INPUT = 11;
const VALUE_INFO_NAME = 1;

/**
 * The names of an ONNX graph's inputs, in the graph's order.
 *
 * @example
 * ```ts
 * graphInputNames('models/gpt2/onnx/decoder_model_merged.onnx'); // ['input_ids', 'attention_mask', 'past_key_values.0.key', ...]
 * ```
 */
export function graphInputNames(path: string): string[] {
  // Opened without blocking and read only if a regular file: this runs on the main thread, and a FIFO or a device
  // (what a dead mount looks like) would block it; the worker's load then meets it under the pool's startTimeoutMs.
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file`);
    const bytes = new FileBytes(fd);
    const names: string[] = [];
    for (const model of fields(bytes, 0, fstatSync(fd).size)) {
      if (model.field !== MODEL_GRAPH || model.wire !== 2) continue;
      for (const part of fields(bytes, model.start, model.end)) {
        if (part.field !== GRAPH_INPUT || part.wire !== 2) continue;
        for (const info of fields(bytes, part.start, part.end)) {
          if (info.field === VALUE_INFO_NAME && info.wire === 2)
            names.push(bytes.text(info.start, info.end - info.start));
        }
      }
    }
    return names;
  } finally {
    closeSync(fd);
  }
}

/** The inputs the continuous decode loop feeds besides the KV cache. */
export const LOOP_INPUTS = ['input_ids', 'attention_mask'] as const;

/**
 * Whether a decoder graph has what the continuous loop drives: `input_ids`, `attention_mask` and `past_key_values.*`
 * inputs. The worker checks the outputs (`present.*`) and the KV type when it loads the session.
 *
 * @example
 * ```ts
 * hasKvCache(['input_ids', 'attention_mask']); // false: request scheduling only
 * ```
 */
export function hasKvCache(inputNames: readonly string[]): boolean {
  return (
    LOOP_INPUTS.every((name) => inputNames.includes(name)) &&
    inputNames.some((name) => name.startsWith('past_key_values.'))
  );
}
