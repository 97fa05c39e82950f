import type { ServerResponse } from 'node:http';
import { batchHeaders, watchDisconnect, writeHttpError, writeSse } from '@microbatch/core';
import type { CallOptions, DispatchInfo } from '@microbatch/core';
import type { TokenUsage } from '@microbatch/inference';
import { type CompletionRequest, type CompletionRequestLimits, parseCompletionRequest } from './completion-request.js';
import {
  type Completion,
  type CompletionMeta,
  completionMeta,
  toCompletion,
  toCompletionChunk,
  toUsageChunk,
} from './completion-response.js';
import { sendJson } from './http-response.js';
import { mergeStreams } from './merge-streams.js';
import type { TextCompletionModel } from './text-completion-model.js';

/**
 * Answers one OpenAI `POST /v1/completions` request on a Node response, given its parsed JSON body.
 *
 * @example
 * ```ts
 * app.post('/v1/completions', express.json(), (req, res) => completions(req.body, res));
 * ```
 */
export type CompletionsEndpoint = (body: unknown, res: ServerResponse) => Promise<void>;

/** What the endpoint needs of a model: see `createTextCompletionModel`. */
export type CompletionsModel = Pick<TextCompletionModel, 'id' | 'generate' | 'streamer' | 'validate'>;

/**
 * Creates an OpenAI-compatible completions endpoint over a text-completion model, for any framework whose response
 * is a Node `ServerResponse` (Express, Koa's `ctx.res`, Nest on Express). Each prompt of the request is one batched
 * item, so the prompts of an array (and of concurrent requests) share model calls; the outputs come back as one
 * `text_completion` with indexed choices. With `stream: true`, each decoded piece is sent as an OpenAI chunk
 * (`data: {...}`) as soon as it exists, then `data: [DONE]`. Invalid requests get 400 naming the field and never
 * reach the model; a client that disconnects cancels its items. Never rejects.
 *
 * @example
 * ```ts
 * const completions = createCompletionsEndpoint(model, { maxPrompts: 8 });
 * router.post('/v1/completions', async (ctx) => {
 *   ctx.respond = false;
 *   await completions(ctx.request.body, ctx.res);
 * });
 * ```
 */
export function createCompletionsEndpoint(model: CompletionsModel, limits: CompletionRequestLimits = {}): CompletionsEndpoint {
  if (typeof model !== 'object' || model === null || typeof model.validate !== 'function') {
    throw new TypeError('Expected `model` to be a text-completion model from `createTextCompletionModel()`');
  }
  return async (body, res) => {
    const disconnect = watchDisconnect(res);
    // Ends every prompt's item once the request is answered or failed: a failed sibling makes the others useless.
    const done = new AbortController();
    const call: CallOptions = {
      signal: AbortSignal.any([disconnect.signal, done.signal]),
      onDispatch: (info: DispatchInfo) => {
        if (!res.headersSent) for (const [name, value] of Object.entries(batchHeaders(info))) res.setHeader(name, value);
      },
    };
    try {
      const request = parseCompletionRequest(body, model.validate, limits);
      const meta = completionMeta(model.id);
      if (request.stream) {
        const chunks = streamCompletion(model, request, meta, call);
        // Pulled before any header goes out, so a failure before the first chunk is still a JSON error.
        const first = await chunks.next();
        await writeSse(res, first, chunks, disconnect.signal);
        return;
      }
      const outputs = await Promise.all(request.inputs.map((input) => model.generate.call(input, call)));
      sendJson(res, 200, toCompletion(meta, outputs));
    } catch (error) {
      // A client that went away gets nothing: its response is already closed.
      if (!disconnect.signal.aborted) writeHttpError(res, error);
    } finally {
      done.abort();
      disconnect.dispose();
    }
  };
}

async function* streamCompletion(
  model: CompletionsModel,
  request: CompletionRequest,
  meta: CompletionMeta,
  call: CallOptions,
): AsyncGenerator<Completion, void, undefined> {
  const usages: TokenUsage[] = [];
  for await (const [index, chunk] of mergeStreams(request.inputs.map((input) => model.streamer.stream(input, call)))) {
    if (chunk.usage !== null) usages.push(chunk.usage);
    yield toCompletionChunk(meta, index, chunk);
  }
  if (request.includeUsage) yield toUsageChunk(meta, usages);
}
