import { randomBytes } from 'node:crypto';
import type { FinishReason, TextGenerationChunk, TextGenerationOutput, TokenUsage } from '@microbatch/inference';

/**
 * One choice of an OpenAI completion (or of a streamed chunk, where `finish_reason` is `null` until the last one).
 *
 * @example
 * ```ts
 * const choice: CompletionChoice = { text: ' there was a cat', index: 0, logprobs: null, finish_reason: 'length' };
 * ```
 */
export interface CompletionChoice {
  readonly text: string;
  readonly index: number;
  readonly logprobs: null;
  readonly finish_reason: FinishReason | null;
}

/**
 * OpenAI's `text_completion` object: the answer of `POST /v1/completions`, and the shape of each streamed chunk
 * (which has no `usage`, except the last chunk of a stream asked for with `stream_options.include_usage`).
 *
 * @example
 * ```ts
 * const { choices: [{ text }], usage } = completion;
 * ```
 */
export interface Completion {
  readonly id: string;
  readonly object: 'text_completion';
  /** Unix time in seconds. */
  readonly created: number;
  readonly model: string;
  readonly choices: readonly CompletionChoice[];
  readonly usage?: TokenUsage;
}

/**
 * What every response and chunk of one request shares.
 *
 * @example
 * ```ts
 * const meta = completionMeta('tinystories-656k'); // { id: 'cmpl-…', object: 'text_completion', created, model }
 * ```
 */
export type CompletionMeta = Omit<Completion, 'choices' | 'usage'>;

/**
 * A fresh id and creation time for one request's completion, as OpenAI gives them (`cmpl-…`, Unix seconds).
 *
 * @example
 * ```ts
 * const meta = completionMeta(model.id);
 * ```
 */
export function completionMeta(model: string): CompletionMeta {
  return {
    id: `cmpl-${randomBytes(12).toString('hex')}`,
    object: 'text_completion',
    created: Math.floor(Date.now() / 1000),
    model,
  };
}

/**
 * The JSON answer of a non-streamed request: one choice per output, indexed in prompt order, and the usage summed
 * over all of them.
 *
 * @example
 * ```ts
 * res.json(toCompletion(completionMeta(model.id), await Promise.all(inputs.map((input) => model.generate(input)))));
 * ```
 */
export function toCompletion(meta: CompletionMeta, outputs: readonly TextGenerationOutput[]): Completion {
  const choices = outputs.map(({ text, finish_reason }, index) => ({ text, index, logprobs: null, finish_reason }));
  return { ...meta, choices, usage: sumUsage(outputs.map((output) => output.usage)) };
}

/**
 * One streamed chunk of choice `index`, in OpenAI's shape (`finish_reason` is `null` until its last chunk).
 *
 * @example
 * ```ts
 * toCompletionChunk(meta, 0, { text: 'Once', finish_reason: null, usage: null }).choices[0].text; // 'Once'
 * ```
 */
export function toCompletionChunk(meta: CompletionMeta, index: number, chunk: TextGenerationChunk): Completion {
  return { ...meta, choices: [{ text: chunk.text, index, logprobs: null, finish_reason: chunk.finish_reason }] };
}

/**
 * The last chunk of a stream asked for with `stream_options.include_usage`: no choices, the summed usage.
 *
 * @example
 * ```ts
 * toUsageChunk(meta, [finalChunk.usage]).usage?.total_tokens;
 * ```
 */
export function toUsageChunk(meta: CompletionMeta, usages: readonly TokenUsage[]): Completion {
  return { ...meta, choices: [], usage: sumUsage(usages) };
}

/**
 * Every prompt counts: the prompt tokens add up, and so do the tokens each prompt's sequence reused from the prefix
 * cache (`prompt_tokens_details.cached_tokens`, only when the runner reported it: a runner without a prefix cache
 * leaves it out, and so does the answer).
 */
function sumUsage(usages: readonly TokenUsage[]): TokenUsage {
  let prompt = 0;
  let completion = 0;
  let cached: number | undefined;
  for (const usage of usages) {
    prompt += usage.prompt_tokens;
    completion += usage.completion_tokens;
    const reused = usage.prompt_tokens_details?.cached_tokens;
    if (reused !== undefined) cached = (cached ?? 0) + reused;
  }
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
  };
}
