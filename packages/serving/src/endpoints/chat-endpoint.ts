// OpenAI's `POST /v1/chat/completions` on the endpoint skeleton: the conversation rendered by the model's chat
// template, each of its `n` choices one batched item, through the same batchers as `/v1/completions`.
import { fail } from '@microbatch/core/util';
import type { GenerationMetrics } from '@microbatch/prometheus';
import {
  type ChatRequest,
  type ChatRequestLimits,
  checkChatRequestLimits,
  parseChatRequest,
} from '../openai/chat-request.js';
import {
  type ChatCompletion,
  type ChatCompletionChunk,
  chatMeta,
  toChatChunk,
  toChatCompletion,
  toChatUsageChunk,
  toolCallDeltas,
} from '../openai/chat-response.js';
import { ToolCallStream } from '../openai/tool-call-stream.js';
import { parseToolCalls } from '../openai/tool-calls.js';
import { type ChatTemplate, PLAIN_CHAT_TEMPLATE } from '../openai/chat-template.js';
import type { TextCompletionService } from '../service/text-completion-service.js';
import type { ClientKey } from './client-key.js';
import { type EndpointCall, type NodeJsonEndpoint, createOpenAiEndpoint } from './openai-endpoint.js';
import { generateAll, streamAll } from './text-generations.js';

/**
 * Answers one OpenAI `POST /v1/chat/completions` request on a Node response, given its parsed JSON body.
 *
 * @example
 * ```ts
 * app.post('/v1/chat/completions', express.json(), (req, res) => chat(req.body, res));
 * ```
 */
export type ChatCompletionsEndpoint = NodeJsonEndpoint;

/** What the endpoint needs of a model: see `createTextCompletionModel`. */
export type ChatCompletionsModel = Pick<
  TextCompletionService,
  'id' | 'generate' | 'streamer' | 'validate' | 'validateOffThread'
> & {
  readonly chatTemplate?: ChatTemplate;
};

/**
 * Options of {@link createChatCompletionsEndpoint}.
 *
 * @example
 * ```ts
 * createChatCompletionsEndpoint(model, { limits: { maxChoices: 4 }, exposeDetails: true });
 * ```
 */
export interface ChatCompletionsEndpointOptions {
  /** Bounds of a request beyond the model's own. */
  readonly limits?: ChatRequestLimits;
  /**
   * Who a request comes from, for fair shares of the queue and of each batch. OpenAI's `user` never is.
   * @default the client's address
   */
  readonly clientKey?: ClientKey;
  /** Generation metrics (`createGenerationMetrics`): each choice's queue time, first token, decode. */
  readonly generation?: Pick<GenerationMetrics, 'start'>;
  /**
   * Whether a refusal (503) keeps the engine's own message and `details`.
   * @default false
   */
  /**
   * Whether every client shares one prefix cache (a documented system prompt all clients send); off, each tenant
   * (API key, else `clientKey`'s fairness key) has a partition of its own (see `OpenAiEndpointOptions`).
   * @default false
   */
  readonly sharedPrefixCache?: boolean;
  readonly exposeDetails?: boolean;
}

type Answer = ChatCompletion | ChatCompletionChunk;

/**
 * Creates an OpenAI-compatible chat completions endpoint over a text-completion model, through the same batchers
 * (and so the same scheduling, admission and fairness) as `/v1/completions`: the conversation is rendered with the
 * model's chat template (`model.chatTemplate`, else the plain role-prefixed fallback) and each of its `n` choices
 * is one batched item. With `stream: true` the answer is `chat.completion.chunk` events: a first delta with
 * `role: 'assistant'` per choice, content deltas as they are decoded, a chunk with `finish_reason`, the usage chunk
 * when `stream_options.include_usage` asks for it, then `data: [DONE]`. Invalid requests get 400 naming the field;
 * every error is in OpenAI's shape, its status from core's `toHttpError`. Never rejects.
 *
 * @example
 * ```ts
 * const chat = createChatCompletionsEndpoint(model, { limits: { maxChoices: 4 } });
 * router.post('/v1/chat/completions', async (ctx) => {
 *   ctx.respond = false;
 *   await chat(ctx.request.body, ctx.res);
 * });
 * ```
 */
export function createChatCompletionsEndpoint(
  model: ChatCompletionsModel,
  options: ChatCompletionsEndpointOptions = {},
): ChatCompletionsEndpoint {
  if (typeof model !== 'object' || model === null || typeof model.validate !== 'function') {
    fail('model', 'a text-completion model from `createTextCompletionModel()`', model);
  }
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  const { limits = {}, clientKey, generation, exposeDetails, sharedPrefixCache } = options;
  checkChatRequestLimits(limits);
  const template = model.chatTemplate ?? PLAIN_CHAT_TEMPLATE;
  return createOpenAiEndpoint<ChatRequest, Answer>({
    parse: (body) => parseChatRequest(body, model.validateOffThread ?? model.validate, template, limits),
    complete: async (exchange) =>
      toChatCompletion(
        chatMeta(model.id),
        await generateAll(model, exchange),
        exchange.request.logprobs,
        exchange.request.tools,
      ),
    stream: (exchange) => streamChat(model, exchange),
    clientKey,
    sharedPrefixCache,
    generation: {
      model: model.id,
      operation: 'chat',
      sequences: (request) => request.inputs.length,
      metrics: generation,
    },
    exposeDetails,
  });
}

async function* streamChat(
  model: ChatCompletionsModel,
  exchange: EndpointCall<ChatRequest>,
): AsyncGenerator<ChatCompletionChunk, void, undefined> {
  const { request } = exchange;
  const meta = chatMeta(model.id);
  const { includeUsage } = request;
  const usages = [];
  const started = new Set<number>();
  const { tools } = request;
  // With `auto` tools the model may answer calls: a choice's text is held until it ends, then sent as content or as
  // `delta.tool_calls` pieces (a call is only known to be one once it parses).
  const held = new Map<number, string>();
  const forced = new Map<number, ToolCallStream>();
  for await (const [index, chunk] of streamAll(model, exchange)) {
    // The role goes first, once per choice, when its generation has begun (so a refused request sends nothing).
    if (!started.has(index)) {
      started.add(index);
      yield toChatChunk(meta, index, { role: 'assistant', content: '' }, null, null, includeUsage);
    }
    if (tools !== undefined && (tools.choice === 'required' || typeof tools.choice === 'object')) {
      // A forced call is read as it is generated: each call's name, then its arguments in fragments.
      const reader = forced.get(index) ?? new ToolCallStream();
      forced.set(index, reader);
      for (const piece of reader.push(chunk.text)) {
        yield toChatChunk(meta, index, { tool_calls: [piece] }, null, null, includeUsage);
      }
      if (chunk.usage !== null) usages.push(chunk.usage);
      if (chunk.finish_reason !== null) {
        // Cut by `max_tokens`, the last call is incomplete: `length`, as OpenAI says then.
        const reason = chunk.finish_reason === 'stop' && reader.calls > 0 ? 'tool_calls' : chunk.finish_reason;
        yield toChatChunk(meta, index, {}, reason, null, includeUsage);
      }
      continue;
    }
    if (tools !== undefined && tools.choice !== 'none') {
      held.set(index, (held.get(index) ?? '') + chunk.text);
      if (chunk.usage !== null) usages.push(chunk.usage);
      if (chunk.finish_reason === null) continue;
      const text = held.get(index) ?? '';
      const { content, calls } = parseToolCalls(text, tools);
      if (calls.length === 0) {
        if (text !== '') yield toChatChunk(meta, index, { content: text }, null, null, includeUsage);
        yield toChatChunk(meta, index, {}, chunk.finish_reason, null, includeUsage);
        continue;
      }
      if (content !== null) yield toChatChunk(meta, index, { content }, null, null, includeUsage);
      for (const piece of toolCallDeltas(calls)) {
        yield toChatChunk(meta, index, { tool_calls: [piece] }, null, null, includeUsage);
      }
      yield toChatChunk(meta, index, {}, 'tool_calls', null, includeUsage);
      continue;
    }
    const logprobs = request.logprobs ? { content: chunk.logprobs ?? [], refusal: null } : null;
    if (chunk.text !== '') yield toChatChunk(meta, index, { content: chunk.text }, null, logprobs, includeUsage);
    if (chunk.finish_reason !== null) {
      // Log-probabilities of tokens that added no text (a stop string's, EOS) ride on the finishing chunk.
      const rest = chunk.text === '' ? logprobs : request.logprobs ? { content: [], refusal: null } : null;
      yield toChatChunk(meta, index, {}, chunk.finish_reason, rest, includeUsage);
    }
    if (chunk.usage !== null) usages.push(chunk.usage);
  }
  if (includeUsage) yield toChatUsageChunk(meta, usages);
}
