// What each runner is configured with. The specs travel to the worker in `workerData`, so every field must survive
// structured cloning: plain data only, no functions or class instances.
import type { ModelDtype } from '../spec/model-dtypes.js';

/**
 * A transformers.js `text-generation` runner: batched, left-padded generation with per-request parameters.
 *
 * @example
 * ```ts
 * const runner: TextGenerationRunnerSpec = { task: 'text-generation', model: 'models/tinystories-656k', maxNewTokens: 32 };
 * ```
 */
export interface TextGenerationRunnerSpec {
  readonly task: 'text-generation';
  /** The model folder in transformers.js layout (`config.json`, `tokenizer.json`, `onnx/model.onnx`). */
  readonly model: string;
  /**
   * Stop strings applied to every request on top of its own `stop`; generation stops at the first one and its
   * text is removed. The default suits the bundled TinyStories family, which spells out `<|end_story|>`.
   * @default ['<|end_story|>']
   */
  readonly stop?: readonly string[];
  /**
   * `max_new_tokens` of a request that does not give one.
   * @default 64
   */
  readonly maxNewTokens?: number;
  /**
   * `temperature` of a request that does not give one (0 is greedy).
   * @default 1
   */
  readonly temperature?: number;
  /**
   * `top_p` of a request that does not give one.
   * @default 1
   */
  readonly topP?: number;
  /**
   * Tokens the model can attend to; a request whose prompt plus `max_new_tokens` exceeds it fails with
   * `INVALID_INPUT`. `0` reads `max_position_embeddings` from the model's `config.json`.
   * @default 0
   */
  readonly contextLength?: number;
  /**
   * Seeds sampling, so sampled output is reproducible. With `'continuous'` each request draws from its own stream,
   * seeded from this seed and its arrival order at the worker; with `'request'` each worker's one sampler is
   * seeded once, so output depends on the sequence of batches too. `-1` leaves it unseeded.
   * @default -1
   */
  readonly seed?: number;
  /**
   * How requests share the model. `'continuous'` (iteration-level): the worker runs one decode loop; requests join
   * it at the next step, leave it the step they finish (answered at once) and never split it by sampling
   * parameters. `'request'`: each batch is one `generate()` call that runs until its longest request ends; a request
   * that arrives meanwhile waits for the whole batch. Give the batcher {@link WorkerPool.batcherOptions}.
   * @default 'continuous'
   */
  readonly scheduling?: 'continuous' | 'request';
  /**
   * `'continuous'` only: the most sequences one worker's decode loop runs together (the rows of a decode step).
   * Not the batcher's `maxBatchSize`: under continuous scheduling the batcher hands the loop one request at a time.
   * @default 32
   */
  readonly maxSequences?: number;
  /**
   * `'continuous'` only: the most tokens one iteration of the decode loop runs (vLLM's `max_num_batched_tokens`):
   * a decode token for each running row plus the (padded) prompt tokens of its prefill calls. A prompt longer than
   * what is left is prefilled in chunks over the next iterations; running rows decode at every iteration, so a long
   * prompt delays each of their tokens by at most one chunk's prefill. Must exceed `maxSequences`. Smaller: steadier
   * streams while long prompts arrive; larger: those prompts' first token sooner.
   * @default 64, or `2 * maxSequences` when that is more
   */
  readonly maxStepTokens?: number;
  /**
   * `'continuous'` only: the prefix KV cache's budget per worker, in MiB (0: no cache). Prompts' KV is kept in
   * 16-token blocks (hashed chains), least recently used evicted first; a newcomer whose prompt starts with cached
   * blocks reuses them and prefills only the rest.
   * @default 64
   */
  readonly prefixCacheMb?: number;
  /**
   * Which of the folder's ONNX files to load, as transformers.js names the formats (`'q8'`: `model_quantized.onnx`,
   * `'q4'`: `model_q4.onnx`, ...). `'auto'`: the first the folder has in a CPU preference order (q8, int8, uint8, q4,
   * bnb4, fp32, q4f16, fp16). A dtype whose file is missing is refused at start, naming the dtypes the folder has.
   * @default 'auto'
   */
  readonly dtype?: 'auto' | ModelDtype;
}

/**
 * A transformers.js `feature-extraction` runner: one pooled embedding per text.
 *
 * @example
 * ```ts
 * const runner: FeatureExtractionRunnerSpec = { task: 'feature-extraction', model: 'models/all-MiniLM-L6-v2' };
 * ```
 */
export interface FeatureExtractionRunnerSpec {
  readonly task: 'feature-extraction';
  /** The model folder in transformers.js layout. */
  readonly model: string;
  /**
   * How token vectors become one vector: the attention-masked mean, the first token or the last token.
   * @default 'mean'
   */
  readonly pooling?: 'mean' | 'cls' | 'last_token';
  /**
   * Scale each embedding to unit length (L2), as cosine-similarity search expects.
   * @default true
   */
  readonly normalize?: boolean;
  /**
   * Which of the folder's ONNX files to load, as transformers.js names the formats (`'q8'`: `model_quantized.onnx`,
   * `'q4'`: `model_q4.onnx`, ...). `'auto'`: the first the folder has in a CPU preference order (q8, int8, uint8, q4,
   * bnb4, fp32, q4f16, fp16). A dtype whose file is missing is refused at start, naming the dtypes the folder has.
   * @default 'auto'
   */
  readonly dtype?: 'auto' | ModelDtype;
}

/**
 * A transformers.js `text-classification` runner: the top labels and scores per text.
 *
 * @example
 * ```ts
 * const runner: TextClassificationRunnerSpec = { task: 'text-classification', model: 'models/sst2', topK: 2 };
 * ```
 */
export interface TextClassificationRunnerSpec {
  readonly task: 'text-classification';
  /** The model folder in transformers.js layout (labels from `config.json` `id2label`). */
  readonly model: string;
  /**
   * How many labels each result lists, best first.
   * @default 1
   */
  readonly topK?: number;
  /**
   * Which of the folder's ONNX files to load, as transformers.js names the formats (`'q8'`: `model_quantized.onnx`,
   * `'q4'`: `model_q4.onnx`, ...). `'auto'`: the first the folder has in a CPU preference order (q8, int8, uint8, q4,
   * bnb4, fp32, q4f16, fp16). A dtype whose file is missing is refused at start, naming the dtypes the folder has.
   * @default 'auto'
   */
  readonly dtype?: 'auto' | ModelDtype;
}

/**
 * An onnxruntime-node runner for any ONNX model whose inputs and outputs have a batch axis first.
 *
 * @example
 * ```ts
 * const runner: OnnxRunnerSpec = { task: 'onnx', model: 'models/embedder.onnx', outputs: ['embeddings'] };
 * ```
 */
export interface OnnxRunnerSpec {
  readonly task: 'onnx';
  /** The `.onnx` file. */
  readonly model: string;
  /**
   * Which outputs each item receives; empty means all of them.
   * @default []
   */
  readonly outputs?: readonly string[];
  /**
   * Where padding goes when items' sequence lengths differ.
   * @default 'right'
   */
  readonly paddingSide?: 'left' | 'right';
  /**
   * The value padding positions of each named input get; inputs not listed get 0.
   * @default {}
   */
  readonly padValues?: Readonly<Record<string, number>>;
  /**
   * The model input that receives a generated mask (1 for real positions, 0 for padding) when items do not
   * give it themselves; ignored when the model has no input of that name.
   * @default 'attention_mask'
   */
  readonly attentionMaskInput?: string;
  /**
   * Outputs whose second axis follows the padded sequence and is cut back to each item's length. `'auto'` picks
   * outputs whose second dimension has the same symbolic name as an input's sequence dimension.
   * @default 'auto'
   */
  readonly trimOutputs?: 'auto' | readonly string[];
}

/**
 * Every runner a worker pool can host; `task` tells them apart.
 *
 * @example
 * ```ts
 * const runners: RunnerSpec[] = [{ task: 'onnx', model: 'a.onnx' }, { task: 'text-generation', model: 'models/lm' }];
 * ```
 */
export type RunnerSpec =
  | TextGenerationRunnerSpec
  | FeatureExtractionRunnerSpec
  | TextClassificationRunnerSpec
  | OnnxRunnerSpec;

/** A runner spec with every default applied and the model path made absolute. */
export type ResolvedRunnerSpec =
  | Required<TextGenerationRunnerSpec>
  | Required<FeatureExtractionRunnerSpec>
  | Required<TextClassificationRunnerSpec>
  | Required<OnnxRunnerSpec>;
