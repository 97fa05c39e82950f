// OpenAI's `POST /v1/completions` on the endpoint skeleton: each prompt one batched item, the outputs one
// `text_completion` with indexed choices, or its chunks as they are decoded.
import type { GenerationMetrics } from '@microbatch/prometheus';
import { fail } from '@microbatch/core/util';
import {
  type CompletionRequest,
  type CompletionRequestLimits,
  checkCompletionRequestLimits,
  parseCompletionRequest,
} from '../openai/completion-request.js';
import {
  type Completion,
  completionMeta,
  toCompletion,
  toCompletionChunk,
  toUsageChunk,
} from '../openai/completion-response.js';
import type { TextCompletionService } from '../service/text-completion-service.js';
import type { ClientKey } from './client-key.js';
import { type EndpointCall, type NodeJsonEndpoint, createOpenAiEndpoint } from './openai-endpoint.js';
import { generateAll, streamAll } from './text-generations.js';

/**
 * Answers one OpenAI `POST /v1/completions` request on a Node response, given its parsed JSON body.
 *
 * @example
 * ```ts
 * app.post('/v1/completions', express.json(), (req, res) => completions(req.body, res));
 * ```
 */
export type CompletionsEndpoint = NodeJsonEndpoint;

/** What the endpoint needs of a model: see `createTextCompletionModel`. */
export type CompletionsModel = Pick<
  TextCompletionService,
  'id' | 'generate' | 'streamer' | 'validate' | 'validateOffThread'
>;

/**
 * Options of {@link createCompletionsEndpoint} (and, with `chatTemplate` aside, of `createChatCompletionsEndpoint`).
 *
 * @example
 * ```ts
 * createCompletionsEndpoint(model, { limits: { maxPrompts: 8 }, clientKey: clientKeyFromHeader('x-api-key-id') });
 * ```
 */
export interface CompletionsEndpointOptions {
  /** Bounds of a request beyond the model's own. */
  readonly limits?: CompletionRequestLimits;
  /**
   * Who a request comes from, for fair shares of the queue and of each batch. OpenAI's `user` never is.
   * @default the client's address
   */
  readonly clientKey?: ClientKey;
  /** Generation metrics (`createGenerationMetrics`): each prompt's queue time, first token, decode. */
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

/**
 * Creates an OpenAI-compatible completions endpoint over a text-completion model, for any framework whose response
 * is a Node `ServerResponse` (Express, Koa's `ctx.res`, Nest on Express). Each prompt of the request is one batched
 * item, so the prompts of an array (and of concurrent requests) share model calls; the outputs come back as one
 * `text_completion` with indexed choices. With `stream: true`, each decoded piece is sent as an OpenAI chunk
 * (`data: {...}`) as soon as it exists, then `data: [DONE]`. Invalid requests get 400 naming the field and never
 * reach the model; a client that disconnects cancels its items. Errors are in OpenAI's shape, their status from
 * core's `toHttpError`. Never rejects.
 *
 * @example
 * ```ts
 * const completions = createCompletionsEndpoint(model, { limits: { maxPrompts: 8 } });
 * router.post('/v1/completions', async (ctx) => {
 *   ctx.respond = false;
 *   await completions(ctx.request.body, ctx.res);
 * });
 * ```
 */
export function createCompletionsEndpoint(
  model: CompletionsModel,
  options: CompletionsEndpointOptions = {},
): CompletionsEndpoint {
  if (typeof model !== 'object' || model === null || typeof model.validate !== 'function') {
    fail('model', 'a text-completion model from `createTextCompletionModel()`', model);
  }
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  const { limits = {}, clientKey, generation, exposeDetails, sharedPrefixCache } = options;
  checkCompletionRequestLimits(limits);
  return createOpenAiEndpoint<CompletionRequest, Completion>({
    parse: (body) => parseCompletionRequest(body, model.validateOffThread ?? model.validate, limits),
    complete: async (exchange) => toCompletion(completionMeta(model.id), await generateAll(model, exchange)),
    stream: (exchange) => streamCompletion(model, exchange),
    clientKey,
    sharedPrefixCache,
    generation: {
      model: model.id,
      operation: 'text_completion',
      sequences: (request) => request.inputs.length,
      metrics: generation,
    },
    exposeDetails,
  });
}

async function* streamCompletion(
  model: CompletionsModel,
  exchange: EndpointCall<CompletionRequest>,
): AsyncGenerator<Completion, void, undefined> {
  const meta = completionMeta(model.id);
  const usages = [];
  for await (const [index, chunk] of streamAll(model, exchange)) {
    if (chunk.usage !== null) usages.push(chunk.usage);
    yield toCompletionChunk(meta, index, chunk);
  }
  if (exchange.request.includeUsage) yield toUsageChunk(meta, usages);
}
