// The input, output and chunk types of each task, keyed by a runner spec's `task`: what makes a pool typed.
import type { OnnxInput, OnnxOutput } from './onnx-types.js';
import type { RunnerSpec } from './runner-specs.js';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from './text-generation-types.js';

/**
 * One label of a classification result.
 *
 * @example
 * ```ts
 * const [{ label, score }] = await classify('What a lovely day');
 * ```
 */
export interface ClassificationLabel {
  readonly label: string;
  readonly score: number;
}

/**
 * The input, output and streamed chunk types of each task.
 *
 * @example
 * ```ts
 * type Embedding = RunnerTypes['feature-extraction']['output']; // number[]
 * ```
 */
export interface RunnerTypes {
  'text-generation': { input: TextGenerationInput; output: TextGenerationOutput; chunk: TextGenerationChunk };
  'feature-extraction': { input: string; output: number[]; chunk: never };
  'text-classification': { input: string; output: ClassificationLabel[]; chunk: never };
  onnx: { input: OnnxInput; output: OnnxOutput; chunk: never };
}

/**
 * The input type of a runner spec.
 *
 * @example
 * ```ts
 * type In = InputOf<OnnxRunnerSpec>; // OnnxInput
 * ```
 */
export type InputOf<S extends RunnerSpec> = RunnerTypes[S['task']]['input'];
/**
 * The output type of a runner spec.
 *
 * @example
 * ```ts
 * type Out = OutputOf<TextGenerationRunnerSpec>; // TextGenerationOutput
 * ```
 */
export type OutputOf<S extends RunnerSpec> = RunnerTypes[S['task']]['output'];
/**
 * The streamed chunk type of a runner spec (`never` for tasks that do not stream).
 *
 * @example
 * ```ts
 * type Chunk = ChunkOf<TextGenerationRunnerSpec>; // TextGenerationChunk
 * ```
 */
export type ChunkOf<S extends RunnerSpec> = RunnerTypes[S['task']]['chunk'];
