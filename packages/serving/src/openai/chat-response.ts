import { randomBytes } from 'node:crypto';
import type { FinishReason, TextGenerationOutput, TokenLogprob, TokenUsage } from '@microbatch/inference';
import { type ToolCall, type ToolRequest, parseToolCalls } from './tool-calls.js';

/** Why a choice ended: the generation's reason, or `tool_calls` when its answer is tool calls. */
export type ChatFinishReason = FinishReason | 'tool_calls';

/**
 * One piece of a streamed tool call (`delta.tool_calls[i]`): the first carries `id`, `type` and the name, later ones
 * fragments of `arguments`, as OpenAI streams them.
 */
export interface ToolCallDelta {
  readonly index: number;
  readonly id?: string;
  readonly type?: 'function';
  readonly function: { readonly name?: string; readonly arguments: string };
}

/** A choice's `logprobs`: OpenAI's `{ content: [...] }`, or `null` when not asked for. */
export type ChatLogprobs = { readonly content: readonly TokenLogprob[]; readonly refusal: null } | null;

/**
 * OpenAI's `chat.completion`: the answer of a non-streamed `POST /v1/chat/completions`.
 *
 * @example
 * ```ts
 * const { choices: [{ message }], usage } = completion;
 * ```
 */
export interface ChatCompletion {
  readonly id: string;
  readonly object: 'chat.completion';
  readonly created: number;
  readonly model: string;
  readonly choices: ReadonlyArray<{
    readonly index: number;
    readonly message: {
      readonly role: 'assistant';
      readonly content: string | null;
      readonly refusal: null;
      readonly tool_calls?: readonly ToolCall[];
    };
    readonly finish_reason: ChatFinishReason;
    readonly logprobs: ChatLogprobs;
  }>;
  readonly usage: TokenUsage;
}

/**
 * One `chat.completion.chunk` of a streamed answer.
 *
 * @example
 * ```ts
 * for (const { delta } of chunk.choices) process.stdout.write(delta.content ?? '');
 * ```
 */
export interface ChatCompletionChunk {
  readonly id: string;
  readonly object: 'chat.completion.chunk';
  readonly created: number;
  readonly model: string;
  readonly choices: ReadonlyArray<{
    readonly index: number;
    readonly delta: {
      readonly role?: 'assistant';
      readonly content?: string;
      readonly tool_calls?: readonly ToolCallDelta[];
    };
    readonly finish_reason: ChatFinishReason | null;
    readonly logprobs: ChatLogprobs;
  }>;
  /** With `stream_options.include_usage`: `null` on every chunk but the last, which has no choices. */
  readonly usage?: TokenUsage | null;
}

/** What every response and chunk of one request shares. */
export interface ChatMeta {
  readonly id: string;
  readonly created: number;
  readonly model: string;
}

/**
 * A fresh id (`chatcmpl-…`) and creation time (Unix seconds) for one request.
 *
 * @example
 * ```ts
 * const meta = chatMeta(model.id);
 * ```
 */
export function chatMeta(model: string): ChatMeta {
  return { id: `chatcmpl-${randomBytes(12).toString('hex')}`, created: Math.floor(Date.now() / 1000), model };
}

/**
 * The JSON answer of a non-streamed request: one choice per output; the usage counts the shared prompt once and
 * every choice's completion tokens.
 *
 * @example
 * ```ts
 * toChatCompletion(chatMeta(model.id), outputs, false).choices[0].message.content;
 * ```
 */
export function toChatCompletion(
  meta: ChatMeta,
  outputs: readonly TextGenerationOutput[],
  logprobs: boolean,
  tools?: ToolRequest,
): ChatCompletion {
  return {
    ...meta,
    object: 'chat.completion',
    choices: outputs.map((output, index) => {
      const { content, calls } =
        tools === undefined ? { content: output.text, calls: [] } : parseToolCalls(output.text, tools);
      return {
        index,
        message:
          calls.length === 0
            ? { role: 'assistant', content: output.text, refusal: null }
            : { role: 'assistant', content, refusal: null, tool_calls: calls },
        // Cut by `max_tokens`: the complete calls are answered, with `length` (no call at all: the text is content).
        finish_reason: calls.length === 0 || output.finish_reason === 'length' ? output.finish_reason : 'tool_calls',
        logprobs: logprobs ? { content: output.logprobs ?? [], refusal: null } : null,
      };
    }),
    usage: sumUsage(outputs.map((output) => output.usage)),
  };
}

/**
 * One streamed chunk for choice `index`.
 *
 * @example
 * ```ts
 * toChatChunk(meta, 0, { role: 'assistant', content: '' }, null, null, false);
 * ```
 */
export function toChatChunk(
  meta: ChatMeta,
  index: number,
  delta: ChatCompletionChunk['choices'][number]['delta'],
  finishReason: ChatFinishReason | null,
  logprobs: ChatLogprobs,
  includeUsage: boolean,
): ChatCompletionChunk {
  return {
    ...meta,
    object: 'chat.completion.chunk',
    choices: [{ index, delta, finish_reason: finishReason, logprobs }],
    ...(includeUsage ? { usage: null } : {}),
  };
}

/**
 * The last chunk of a stream asked for with `stream_options.include_usage`: no choices, the summed usage.
 *
 * @example
 * ```ts
 * toChatUsageChunk(meta, usages).usage?.total_tokens;
 * ```
 */
export function toChatUsageChunk(meta: ChatMeta, usages: readonly TokenUsage[]): ChatCompletionChunk {
  return { ...meta, object: 'chat.completion.chunk', choices: [], usage: sumUsage(usages) };
}

/**
 * The choices share one prompt: counted once, as OpenAI counts it; their completions add up. Its cached tokens
 * (`prompt_tokens_details`, only when the runner reported them: it has a prefix cache) are counted like it, once:
 * the most any choice's sequence reused, so they never exceed `prompt_tokens` (vLLM reports one figure for the
 * prompt of an `n` > 1 request too). `/metrics` counts every sequence's reuse.
 */
function sumUsage(usages: readonly TokenUsage[]): TokenUsage {
  const prompt = usages[0]?.prompt_tokens ?? 0;
  let completion = 0;
  let cached: number | undefined;
  for (const usage of usages) {
    completion += usage.completion_tokens;
    const reused = usage.prompt_tokens_details?.cached_tokens;
    if (reused !== undefined) cached = Math.max(cached ?? 0, reused);
  }
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
  };
}

/** How many characters of `arguments` each streamed tool-call piece carries. */
const ARGUMENT_PIECE = 32;

/**
 * The `delta.tool_calls` pieces of an answer's calls, as OpenAI streams them: per call, a first piece with its
 * `index`, `id`, `type` and name (and empty arguments), then its `arguments` in fragments.
 *
 * @example
 * ```ts
 * for (const piece of toolCallDeltas(calls)) yield toChatChunk(meta, 0, { tool_calls: [piece] }, null, null, false);
 * ```
 */
export function toolCallDeltas(calls: readonly ToolCall[]): ToolCallDelta[] {
  return calls.flatMap((call, index) => {
    const pieces: ToolCallDelta[] = [
      { index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } },
    ];
    const args = call.function.arguments;
    for (let at = 0; at < args.length; at += ARGUMENT_PIECE) {
      pieces.push({ index, function: { arguments: args.slice(at, at + ARGUMENT_PIECE) } });
    }
    return pieces;
  });
}
