import { setMaxListeners } from 'node:events';
import type { ServerResponse } from 'node:http';
import { type HttpErrorOptions, serveBatched, writeJson } from '@microbatch/core/http';
import type { Batcher, CallOptions } from '@microbatch/core';
import type { TextGenerationOutput, TokenUsage } from '@microbatch/inference';
import { type ChatRequest, type ChatRequestLimits, parseChatRequest } from './chat-request.js';
import {
  type ChatCompletion,
  type ChatCompletionChunk,
  chatMeta,
  toChatChunk,
  toChatCompletion,
  toChatUsageChunk,
} from './chat-response.js';
import { type ChatTemplate, PLAIN_CHAT_TEMPLATE } from './chat-template.js';
import { type ClientKey, fairnessKeyOf } from './client-key.js';
import { setDecodeBatchHeaders } from './completion-response.js';
import { mergeStreams } from './merge-streams.js';
import { writeOpenAiError } from './openai-error.js';
import type { TextCompletionService } from './text-completion-model.js';

const MAX_LISTENERS_SLACK = 10;

/**
 * Answers one OpenAI `POST /v1/chat/completions` request on a Node response, given its parsed JSON body.
 *
 * @example
 * ```ts
 * app.post('/v1/chat/completions', express.json(), (req, res) => chat(req.body, res));
 * ```
 */
export type ChatCompletionsEndpoint = (body: unknown, res: ServerResponse) => Promise<void>;

/** What the endpoint needs of a model: see `createTextCompletionModel`. */
export type ChatCompletionsModel = Pick<TextCompletionService, 'id' | 'generate' | 'streamer' | 'validate'> & {
  readonly chatTemplate?: ChatTemplate;
};

type Answer = ChatCompletion | ChatCompletionChunk;

/**
 * Creates an OpenAI-compatible chat completions endpoint over a text-completion model, through the same batchers
 * (and so the same scheduling, admission and fairness) as `/v1/completions`: the conversation is rendered with the
 * model's chat template (`model.chatTemplate`, else the plain role-prefixed fallback) and each of its `n` choices
 * is one batched item. With `stream: true` the answer is `chat.completion.chunk` events: a first delta with
 * `role: 'assistant'` per choice, content deltas as they are decoded, a chunk with `finish_reason`, the usage chunk
 * when `stream_options.include_usage` asks for it, then `data: [DONE]`. Invalid requests get 400 naming the field;
 * errors are mapped by `toHttpError` with `errors` (`exposeDetails`). Never rejects.
 *
 * @example
 * ```ts
 * const chat = createChatCompletionsEndpoint(model);
 * router.post('/v1/chat/completions', async (ctx) => {
 *   ctx.respond = false;
 *   await chat(ctx.request.body, ctx.res);
 * });
 * ```
 */
export function createChatCompletionsEndpoint(
  model: ChatCompletionsModel,
  limits: ChatRequestLimits = {},
  clientKey?: ClientKey,
  errors: HttpErrorOptions = {},
): ChatCompletionsEndpoint {
  if (typeof model !== 'object' || model === null || typeof model.validate !== 'function') {
    throw new TypeError('Expected `model` to be a text-completion model from `createTextCompletionModel()`');
  }
  const template = model.chatTemplate ?? PLAIN_CHAT_TEMPLATE;
  return async (body, res) => {
    let request: ChatRequest | undefined;
    let invalid: unknown;
    try {
      request = parseChatRequest(body, model.validate, template, limits);
    } catch (error) {
      invalid = error;
    }
    // Fair shares per client (its address, or the operator's `clientKey`), never per OpenAI `user`.
    const fairnessKey = fairnessKeyOf(res.req, clientKey);
    const target =
      request?.stream === true
        ? {
            streaming: true as const,
            stream: (parsed: ChatRequest, call: CallOptions) =>
              streamChat(model, parsed, { ...call, fairnessKey }, res),
          }
        : {
            streaming: false as const,
            call: (parsed: ChatRequest, call: CallOptions) =>
              completeChat(model, parsed, { ...call, fairnessKey }, res),
          };
    await serveBatched<ChatRequest, Answer>(target as unknown as Batcher<ChatRequest, Answer>, {
      res,
      readInput: () => {
        if (request === undefined) throw invalid;
        return request;
      },
      setHeaders: (headers) => {
        for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      },
      send: (completion) => writeJson(res, 200, completion),
      sendError: (error) => writeOpenAiError(res, error, errors),
    });
  };
}

/** Every choice as one item, admitted together; a failed choice cancels its siblings. */
async function completeChat(
  model: ChatCompletionsModel,
  request: ChatRequest,
  call: CallOptions,
  res: ServerResponse,
): Promise<ChatCompletion> {
  const done = new AbortController();
  const signal = call.signal === undefined ? done.signal : AbortSignal.any([call.signal, done.signal]);
  setMaxListeners(request.inputs.length + MAX_LISTENERS_SLACK, signal);
  try {
    const outputs: TextGenerationOutput[] = await model.generate.callAll(request.inputs, { ...call, signal });
    setDecodeBatchHeaders(res, outputs);
    return toChatCompletion(chatMeta(model.id), outputs, request.logprobs);
  } finally {
    done.abort();
  }
}

async function* streamChat(
  model: ChatCompletionsModel,
  request: ChatRequest,
  call: CallOptions,
  res: ServerResponse,
): AsyncGenerator<ChatCompletionChunk, void, undefined> {
  const meta = chatMeta(model.id);
  const { includeUsage } = request;
  const usages: TokenUsage[] = [];
  if (call.signal !== undefined) setMaxListeners(request.inputs.length + MAX_LISTENERS_SLACK, call.signal);
  const started = new Set<number>();
  for await (const [index, chunk] of mergeStreams(model.streamer.streamAll(request.inputs, call))) {
    // Pulled before the headers go out: the first chunk's batch is what the headers can still say.
    if (started.size === 0) setDecodeBatchHeaders(res, [chunk]);
    // The role goes first, once per choice, when its generation has begun (so a refused request sends nothing).
    if (!started.has(index)) {
      started.add(index);
      yield toChatChunk(meta, index, { role: 'assistant', content: '' }, null, null, includeUsage);
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
