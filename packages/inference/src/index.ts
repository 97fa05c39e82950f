export type { RunOptions, WorkerPool, WorkerPoolOptions, WorkerPoolStats } from './pool-types.js';
export { END_OF_STORY, TEXT_GENERATION_DEFAULTS, textGenerationBatchKey } from './runner-spec.js';
export type {
  ChunkOf,
  ClassificationLabel,
  FeatureExtractionRunnerSpec,
  FinishReason,
  InputOf,
  OnnxInput,
  OnnxInputValue,
  OnnxOutput,
  OnnxRunnerSpec,
  OnnxTensorData,
  OnnxTypedArray,
  OutputOf,
  RunnerSpec,
  RunnerTypes,
  TextClassificationRunnerSpec,
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationOutput,
  TextGenerationRunnerSpec,
  TokenUsage,
} from './runner-types.js';
export { createTextGenerationParser, createTextGenerationValidator } from './text-generation-request.js';
export type {
  TextGenerationLimits,
  TextGenerationParser,
  TextGenerationValidator,
  TextGenerationValidatorOptions,
} from './text-generation-request.js';
export { createWorkerPool } from './worker-pool.js';
