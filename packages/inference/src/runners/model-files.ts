// Which ONNX file of a model folder a runner loads: the one transformers.js would for the runner's `dtype`
// (`onnx/<graph><suffix>.onnx`), checked before anything loads, so a wrong dtype or an incomplete download is
// refused at start naming what the folder has, never as onnxruntime's protobuf error or a hub lookup.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { AUTO_DTYPE_ORDER, MODEL_DTYPE_SUFFIXES } from '../spec/model-dtypes.js';
import type { ModelDtype } from '../spec/model-dtypes.js';
import { externalDataFiles } from './external-data.js';

/**
 * The graph names a task's folder may hold, in the order they are tried: a decoder is `model` (transformers.js v3+
 * exports) or `decoder_model_merged` (older exports such as Xenova/gpt2, with a `use_cache_branch` input); an
 * encoder is `model`.
 *
 * @example
 * ```ts
 * findModelFile('models/all-MiniLM-L6-v2', 'q8', GRAPH_NAMES.encoder).path; // .../onnx/model_quantized.onnx
 * ```
 */
export const GRAPH_NAMES = {
  decoder: ['model', 'decoder_model_merged'],
  encoder: ['model'],
} as const satisfies Record<string, readonly string[]>;

/**
 * The graph a runner loads.
 *
 * @example
 * ```ts
 * const file: ModelFile = { dtype: 'q4', graph: 'model', path: '/models/llama/onnx/model_q4.onnx' };
 * ```
 */
export interface ModelFile {
  readonly dtype: ModelDtype;
  /** The graph's name without dtype suffix, transformers.js's `model_file_name` (`model`, `decoder_model_merged`). */
  readonly graph: string;
  /** The `.onnx` file's absolute path. */
  readonly path: string;
}

/** `onnx/<graph><suffix>.onnx`, relative to the model folder. */
export function graphFile(graph: string, dtype: ModelDtype): string {
  return join('onnx', `${graph}${MODEL_DTYPE_SUFFIXES[dtype]}.onnx`);
}

/** The graphs present in `dir`: by graph name, then in `AUTO_DTYPE_ORDER`. */
function presentGraphs(dir: string, graphs: readonly string[]): ModelFile[] {
  return graphs.flatMap((graph) =>
    AUTO_DTYPE_ORDER.filter((dtype) => existsSync(join(dir, graphFile(graph, dtype)))).map((dtype) => ({
      dtype,
      graph,
      path: join(dir, graphFile(graph, dtype)),
    })),
  );
}

/** `q8 (onnx/model_quantized.onnx), fp32 (onnx/model.onnx)`. */
function describeGraphs(found: readonly ModelFile[]): string {
  return found.map((file) => `${file.dtype} (${graphFile(file.graph, file.dtype)})`).join(', ');
}

/**
 * The graph of `dir` a runner with `dtype` loads, by file names alone: with `'auto'` the first present in
 * `AUTO_DTYPE_ORDER`, otherwise that dtype's file. Throws an `Error` naming the dtypes the folder has when the file
 * is missing. It opens no file (only `stat`s names), so a main thread may call it: a graph on a dead mount blocks
 * the worker that opens it, never the server. {@link resolveModelFile} is this plus the external data check.
 *
 * @example
 * ```ts
 * findModelFile('models/all-MiniLM-L6-v2', 'q8', GRAPH_NAMES.encoder).path; // .../onnx/model_quantized.onnx
 * ```
 */
export function findModelFile(dir: string, dtype: 'auto' | ModelDtype, graphs: readonly string[]): ModelFile {
  const found = presentGraphs(dir, graphs);
  const file = dtype === 'auto' ? found[0] : found.find((each) => each.dtype === dtype);
  if (file === undefined) {
    const expected =
      dtype === 'auto'
        ? graphs.map((graph) => `onnx/${graph}{${AUTO_DTYPE_ORDER.map((d) => MODEL_DTYPE_SUFFIXES[d]).join(',')}}.onnx`)
        : graphs.map((graph) => graphFile(graph, dtype));
    const has = found.length > 0 ? `it has ${describeGraphs(found)}` : 'it has no ONNX model';
    throw new Error(`dtype '${dtype}' needs ${expected.join(' or ')} in ${dir}; ${has}`);
  }
  return file;
}

/**
 * The graph of `dir` a runner with `dtype` loads ({@link findModelFile}), its external data checked: throws an
 * `Error` naming the dtypes the folder has when the file is missing, and naming the missing external data file when
 * the graph keeps its weights beside it. It reads the graph's header fields: call it where the model loads (a
 * worker thread).
 *
 * @example
 * ```ts
 * resolveModelFile('models/gpt2', 'auto', GRAPH_NAMES.decoder); // { dtype: 'q8', graph: 'decoder_model_merged', ... }
 * ```
 */
export function resolveModelFile(dir: string, dtype: 'auto' | ModelDtype, graphs: readonly string[]): ModelFile {
  const file = findModelFile(dir, dtype, graphs);
  const missing = externalDataFiles(file.path).filter((name) => !existsSync(join(dirname(file.path), name)));
  if (missing.length > 0) {
    throw new Error(
      `${graphFile(file.graph, file.dtype)} keeps its weights in ${missing.map((name) => `onnx/${name}`).join(', ')}, ` +
        'which is missing: download it beside the graph',
    );
  }
  return file;
}
