export type {
  DecodeActivity,
  PoolBatcherOptions,
  RunOptions,
  WorkerPool,
  WorkerPoolOptions,
  WorkerPoolStats,
} from './pool/pool-types.js';
export {
  END_OF_STORY,
  TEXT_GENERATION_DEFAULTS,
  defaultMaxStepTokens,
  textGenerationBatchKey,
  textGenerationResume,
} from './spec/runner-spec.js';
export { AUTO_DTYPE_ORDER, DTYPE_CHOICES, MODEL_DTYPE_SUFFIXES } from './spec/model-dtypes.js';
export type { ModelDtype } from './spec/model-dtypes.js';
export type {
  ChunkOf,
  ClassificationLabel,
  DecodeBatch,
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
  PromptTokensDetails,
  RunnerSpec,
  RunnerTypes,
  TextClassificationRunnerSpec,
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationOutput,
  TextGenerationRunnerSpec,
  TokenLogprob,
  TokenUsage,
  TopLogprob,
} from './spec/runner-types.js';
export { createTextGenerationParser, createTextGenerationValidator } from './requests/text-generation-request.js';
export type {
  TextGenerationLimits,
  TextGenerationParser,
  TextGenerationValidator,
  TextGenerationValidatorOptions,
} from './requests/text-generation-request.js';
export { createWorkerPool } from './pool/worker-pool.js';
export { loadTokenizer } from './requests/tokenizer.js';
export type { Tokenizer } from './requests/tokenizer.js';
