// The runner specs travel to the worker in `workerData`, so every field must survive structured cloning:
// plain data only, no functions or class instances.
import type { ModelDtype } from './model-dtypes.js';

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

/**
 * One text-generation request, as returned by the parser / validator of untrusted bodies.
 *
 * @example
 * ```ts
 * const input: TextGenerationInput = { prompt: 'Once upon a time, ', max_new_tokens: 32, temperature: 0 };
 * ```
 */
export interface TextGenerationInput {
  readonly prompt: string;
  /** The most tokens to generate; the runner's `maxNewTokens` when absent. */
  readonly max_new_tokens?: number;
  /** 0 is greedy; the runner's `temperature` when absent. */
  readonly temperature?: number;
  /** Nucleus sampling mass; the runner's `topP` when absent. */
  readonly top_p?: number;
  /** Extra stop strings for this request. */
  readonly stop?: readonly string[];
  /**
   * Seeds this request's own random stream (continuous scheduling only), so its sampled output is reproducible
   * whatever else shares its steps; the runner's `seed` when absent.
   */
  readonly seed?: number;
  /**
   * Report each generated token's log-probability and this many most likely alternatives (0 to 20), read from the
   * decode loop's own logits (continuous scheduling only). Absent: no log-probabilities.
   */
  readonly logprobs?: number;
  /**
   * The token ids this generation already produced and sent (a stream that another worker started, then died):
   * generation continues after them, from the prompt plus these ids (never re-tokenized text), and no text of
   * theirs is sent again. When present (even empty), each chunk carries its `tokens`. Continuous scheduling only;
   * not with `logprobs`.
   */
  readonly resume_tokens?: readonly number[];
}

/**
 * One candidate token and its log-probability under the model (the raw logits' log-softmax, before temperature
 * and top-p), in OpenAI's shape.
 *
 * @example
 * ```ts
 * const alternative: TopLogprob = { token: ' cat', logprob: -0.12, bytes: [32, 99, 97, 116] };
 * ```
 */
export interface TopLogprob {
  readonly token: string;
  readonly logprob: number;
  /** The token's text as UTF-8 bytes. */
  readonly bytes: readonly number[];
}

/**
 * A generated token's log-probability and the most likely alternatives at its step, in OpenAI's shape.
 *
 * @example
 * ```ts
 * const [first] = output.logprobs ?? [];
 * ```
 */
export interface TokenLogprob extends TopLogprob {
  readonly top_logprobs: readonly TopLogprob[];
}

/**
 * Why generation ended: a stop string or end-of-sequence token, or the `max_new_tokens` limit.
 *
 * @example
 * ```ts
 * if (output.finish_reason === 'length') console.log('truncated');
 * ```
 */
export type FinishReason = 'stop' | 'length';

/**
 * Token counts of one generation, OpenAI-style.
 *
 * @example
 * ```ts
 * const { prompt_tokens, completion_tokens } = output.usage;
 * ```
 */
export interface TokenUsage {
  /** Prompt tokens, including the BOS token the tokenizer adds. */
  readonly prompt_tokens: number;
  /** Tokens generated, including the ones that formed a stop string or the end-of-sequence token. */
  readonly completion_tokens: number;
  readonly total_tokens: number;
  /**
   * Continuous scheduling with a prefix cache (`runner.prefixCacheMb` > 0) only: `cached_tokens`, the prompt tokens
   * whose KV this generation's sequence reused from the cache instead of prefilling them (0 on a miss). Absent when
   * the runner has no prefix cache, as OpenAI-compatible servers leave it out when they do not cache prompts.
   */
  readonly prompt_tokens_details?: PromptTokensDetails;
}

/**
 * What a generation's prompt reused (OpenAI's `usage.prompt_tokens_details`).
 *
 * @example
 * ```ts
 * const cached = output.usage.prompt_tokens_details?.cached_tokens ?? 0;
 * ```
 */
export interface PromptTokensDetails {
  /** Prompt tokens whose KV came from the prefix cache: the loop prefilled only the rest. */
  readonly cached_tokens: number;
}

/**
 * Which decode-loop step batched a sequence of continuous text generation: the `size` sequences that got a token in
 * step `id` together, the most this sequence shared a step with (itself included) by the time it was reported, and
 * the first step with that many. Sequences that carry the same `id` shared that step. Step ids name the worker
 * (`w0-3f2a:57`: worker 0, started with nonce 3f2a, its 57th loop iteration).
 *
 * @example
 * ```ts
 * const { text, batch } = await generate(input); // batch: { id: 'w0-3f2a:57', size: 9 }
 * ```
 */
export interface DecodeBatch {
  readonly id: string;
  readonly size: number;
}

/**
 * The result of one text-generation request.
 *
 * @example
 * ```ts
 * const { text, finish_reason, usage } = await generate({ prompt: 'The cat ', temperature: 0 });
 * ```
 */
export interface TextGenerationOutput {
  /** The generated text, without the prompt and without the stop string that ended it. */
  readonly text: string;
  readonly finish_reason: FinishReason;
  readonly usage: TokenUsage;
  /** Continuous scheduling: the decode-loop step that batched this generation (see {@link DecodeBatch}). */
  readonly batch?: DecodeBatch;
  /** Every generated token's log-probability, when the input asked for `logprobs`. */
  readonly logprobs?: readonly TokenLogprob[];
}

/**
 * One streamed piece of a generation; the last one carries `finish_reason` and `usage`.
 *
 * @example
 * ```ts
 * for await (const chunk of streaming.stream(input)) res.write(sseEvent({ text: chunk.text }));
 * ```
 */
export interface TextGenerationChunk {
  /** New text since the previous chunk (may be empty on the last chunk). */
  readonly text: string;
  readonly finish_reason: FinishReason | null;
  readonly usage: TokenUsage | null;
  /**
   * Continuous scheduling, on a generation's first chunk only: the step that batched it so far (see
   * {@link DecodeBatch}), so a server can send it as headers with the first token.
   */
  readonly batch?: DecodeBatch;
  /** The log-probabilities of the tokens generated since the previous chunk, when the input asked for them. */
  readonly logprobs?: readonly TokenLogprob[];
  /**
   * The ids of the tokens generated since the previous chunk (some may have no text yet), when the input had
   * `resume_tokens`: what a worker that takes the stream over resumes from.
   */
  readonly tokens?: readonly number[];
}

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
 * A typed array onnxruntime accepts or returns.
 *
 * @example
 * ```ts
 * const ids: OnnxTypedArray = BigInt64Array.from([1n, 80n]);
 * ```
 */
export type OnnxTypedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

/**
 * A tensor as plain data: what the ONNX runner returns per output, and one form an input value may take.
 *
 * @example
 * ```ts
 * const { dims, data } = output.embeddings; // dims [384], data Float32Array(384)
 * ```
 */
export interface OnnxTensorData {
  /** The onnxruntime element type (`'float32'`, `'int64'`, ...). */
  readonly type: string;
  /** The dimensions, without the batch axis for per-item values. */
  readonly dims: readonly number[];
  readonly data: OnnxTypedArray | readonly string[];
}

/**
 * One named input of one item: a scalar, a (nested) array, a typed array, or `{ data, dims }` (no batch axis).
 *
 * @example
 * ```ts
 * const value: OnnxInputValue = { data: [0.5, 1, 2, 3], dims: [2, 2] };
 * ```
 */
export type OnnxInputValue =
  | number
  | bigint
  | boolean
  | ArrayLike<number | bigint | boolean>
  | ReadonlyArray<ArrayLike<number | bigint | boolean>>
  | { readonly data: ArrayLike<number | bigint>; readonly dims: readonly number[] };

/**
 * One item for the ONNX runner: its value for each model input, without the batch axis. Variable-length
 * sequences are padded per batch, and `attention_mask` is generated when the model has one and it is left out.
 *
 * @example
 * ```ts
 * const item: OnnxInput = { input_ids: [1, 80, 147] };
 * ```
 */
export type OnnxInput = Readonly<Record<string, OnnxInputValue>>;

/**
 * One item's result from the ONNX runner: each requested output, without the batch axis or padding.
 *
 * @example
 * ```ts
 * const { embeddings } = await embed({ input_ids: [1, 80, 147] });
 * ```
 */
export type OnnxOutput = Readonly<Record<string, OnnxTensorData>>;

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
