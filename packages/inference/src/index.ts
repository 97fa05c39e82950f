export type {
  PoolBatcherOptions,
  RunOptions,
  WorkerPool,
  WorkerPoolOptions,
  WorkerPoolStats,
} from './pool/pool-types.js';
export type { DecodeActivity } from './contract/decode-activity.js';
export {
  END_OF_STORY,
  TEXT_GENERATION_DEFAULTS,
  defaultMaxStepTokens,
  textGenerationBatchKey,
  textGenerationResume,
} from './spec/runner-spec.js';
export type { ChunkOf, ClassificationLabel, InputOf, OutputOf, RunnerTypes } from './contract/task-types.js';
export { AUTO_DTYPE_ORDER, DTYPE_CHOICES, MODEL_DTYPE_SUFFIXES } from './spec/model-dtypes.js';
export type { ModelDtype } from './spec/model-dtypes.js';
// Main-thread safe (file names only: no file opened, no onnxruntime): a caller of the raw `onnx` runner picks the
// file a dtype names with it, as the task runners do.
export { GRAPH_NAMES, findModelFile } from './runners/model-files.js';
export type { ModelFile } from './runners/model-files.js';
export type {
  DecodeBatch,
  FinishReason,
  PromptTokensDetails,
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationOutput,
  TokenLogprob,
  TokenUsage,
  TopLogprob,
} from './contract/text-generation-types.js';
export type { GrammarSpec } from './contract/text-generation-types.js';
export { checkGrammarSpec } from './grammar/grammar-spec.js';
export { SUPPORTED_SCHEMA_KEYWORDS } from './grammar/schema-keywords.js';
export type {
  FeatureExtractionRunnerSpec,
  OnnxRunnerSpec,
  RunnerSpec,
  TextClassificationRunnerSpec,
  TextGenerationRunnerSpec,
} from './contract/runner-specs.js';
export type { OnnxInput, OnnxInputValue, OnnxOutput, OnnxTensorData, OnnxTypedArray } from './contract/onnx-types.js';
export { SCHEDULINGS, SCHEDULING_RULES, appliesIn, schedulingRefusal, settingsWhere } from './spec/scheduling-rules.js';
export type { RefusalReason, RunMode, Scheduling, SchedulingRule, SchedulingSetting } from './spec/scheduling-rules.js';
export { NO_KV_CACHE_FALLBACK, schedulingForGraph } from './spec/scheduling-rules.js';
export type { SchedulingChoice } from './spec/scheduling-rules.js';
// Reads the graph's header (its input names; the weights are skipped): start-up only, before any worker loads it.
export { decoderScheduling } from './runners/decoder-scheduling.js';
export type { DecoderSchedulingOptions } from './runners/decoder-scheduling.js';
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
export { createTokenizerThreads } from './requests/tokenizer-threads.js';
export type { ThreadEncoding, ThreadEncodings, TokenizerThreads } from './requests/tokenizer-threads.js';
