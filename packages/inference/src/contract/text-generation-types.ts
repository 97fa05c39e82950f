// What a text-generation request, its result and its streamed chunks look like: the values that cross between the
// pool (main thread) and the runners (worker side), and what `@microbatch/inference` hands its callers.

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
  /**
   * Constrains the generated text to a grammar (JSON Schema, JSON, a regular expression, a choice list), enforced
   * by a token mask at every step (under either scheduling). Absent: free text.
   */
  readonly grammar?: GrammarSpec;
  /**
   * The prefix cache's partition of this request (continuous scheduling): a prompt reuses only blocks cached under
   * the same salt, so requests under different salts never learn anything of each other's prompts (not from
   * `cached_tokens`, not from the time to the first token). The serving apps set it from the tenant (the API key's
   * name, or the fairness key) and the request's own `cache_salt`, as vLLM's `cache_salt`. Absent: `''`. At most
   * 1,024 characters.
   */
  readonly cache_salt?: string;
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
 * A grammar that constrains a generation (structured outputs): every sampled token must keep the text a prefix of
 * the grammar's language, and the row ends (`finish_reason: "stop"`) when the grammar is complete. Plain data, so it
 * travels with the request to whichever worker runs it (`--queue` included) and is compiled there.
 *
 * - `json`: a JSON value; with `schema`, one valid against that JSON Schema (the supported keywords:
 *   `SUPPORTED_SCHEMA_KEYWORDS`), without it any JSON object (OpenAI's JSON mode).
 * - `regex`: text matching the whole `pattern` (a subset of JavaScript regular expressions: `regex-to-ebnf.ts`).
 * - `choice`: exactly one of `choices`.
 *
 * @example
 * ```ts
 * const grammar: GrammarSpec = { type: 'json', schema: { type: 'object', properties: { n: { type: 'integer' } } } };
 * ```
 */
export type GrammarSpec =
  | { readonly type: 'json'; readonly schema?: Readonly<Record<string, unknown>> }
  | { readonly type: 'regex'; readonly pattern: string }
  | { readonly type: 'choice'; readonly choices: readonly string[] };
