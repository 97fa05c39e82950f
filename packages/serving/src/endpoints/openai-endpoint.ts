// The one skeleton of the OpenAI endpoints (`/v1/completions`, `/v1/chat/completions`, `/v1/embeddings`): parse the
// body, key the request to its client for fair shares, admit and serve it through core's request path (whole or
// streamed), time its generated sequences for the metrics and the request's trace, and answer every error in
// OpenAI's shape. An endpoint says only how its body is read and how its answer is made.
import type { ServerResponse } from 'node:http';
import type { Batcher, CallOptions } from '@microbatch/core';
import { type HttpErrorOptions, serveBatched, writeJson, writeJsonText } from '@microbatch/core/http';
import { checkBoolean, checkFunction, checkOptionalFunction, fail, isPromiseLike } from '@microbatch/core/util';
import type { GenerationMetrics, SequenceTimer } from '@microbatch/prometheus';
import { writeOpenAiError } from '../openai/openai-error.js';
import { prefixCacheTenant } from '../auth/principal.js';
import { type ClientKey, fairnessKeyOf } from './client-key.js';
import { type GenerationOperation, traceSequences } from './generation-trace.js';

/**
 * Answers one request on a Node response, given its parsed JSON body (an OpenAI endpoint). Never rejects.
 *
 * @example
 * ```ts
 * app.post('/v1/completions', jsonBody(), (req, res) => completions(req.body, res));
 * ```
 */
export type NodeJsonEndpoint = (body: unknown, res: ServerResponse) => Promise<void>;

/**
 * One admitted request, as an endpoint's `complete` or `stream` gets it.
 *
 * @example
 * ```ts
 * const complete = ({ request, call }: EndpointCall<EmbeddingsRequest>) => model.embedAll(request.ids, call);
 * ```
 */
export interface EndpointCall<Request> {
  readonly request: Request;
  /** The options of the service's batcher calls: the request's signal and deadline, its fairness key, its timers. */
  readonly call: CallOptions;
  readonly res: ServerResponse;
  /** One timer per generated sequence, where generation metrics are kept or the request is traced. */
  readonly timers: readonly SequenceTimer[] | undefined;
  /**
   * The request's partition of the prefix cache: `key:<name>` of its API key, else its fairness key; `''` with a
   * shared cache. Prompts of different tenants never reuse each other's cached blocks.
   */
  readonly tenant?: string;
}

/**
 * What the endpoint times, per generated sequence (completions, chat; not embeddings).
 *
 * @example
 * ```ts
 * const generation: GenerationTiming<ChatRequest> = { model: 'tiny', operation: 'chat', sequences: (r) => r.inputs.length };
 * ```
 */
export interface GenerationTiming<Request> {
  /** The model's id, for the request's trace. */
  readonly model: string;
  /** OpenTelemetry's `gen_ai.operation.name` of the request's span. */
  readonly operation: GenerationOperation;
  /** How many sequences one request generates (its prompts or choices). */
  readonly sequences: (request: Request) => number;
  /** The generation metrics (`@microbatch/prometheus`'s `createGenerationMetrics`); absent, the trace only. */
  readonly metrics?: Pick<GenerationMetrics, 'start'> | undefined;
}

/**
 * Options of {@link createOpenAiEndpoint}.
 *
 * @example
 * ```ts
 * const options: OpenAiEndpointOptions<EmbeddingsRequest, EmbeddingList> = { parse, complete };
 * ```
 */
export interface OpenAiEndpointOptions<Request, Answer> {
  /**
   * Checks the body; throws (or rejects with) `BatchError('INVALID_INPUT')` naming the field (a 400, OpenAI's
   * `param`). A promise where a check runs off the main thread (a completion's token count).
   */
  readonly parse: (body: unknown) => Request | PromiseLike<Request>;
  /** The whole answer of an admitted request. */
  readonly complete: (exchange: EndpointCall<Request>) => Promise<Answer>;
  /**
   * The whole answer's JSON text, for an answer a generic serializer would write slowly (embeddings: float vectors).
   * @default JSON.stringify
   */
  readonly serialize?: ((answer: Answer) => string) | undefined;
  /** The events of a request whose parsed form says `stream: true`; absent, the endpoint never streams. */
  readonly stream?: ((exchange: EndpointCall<Request>) => AsyncIterable<Answer>) | undefined;
  /**
   * Who a request comes from, for fair shares. A field of the body (OpenAI's `user`) never is.
   * @default the client's address
   */
  readonly clientKey?: ClientKey | undefined;
  /** Per-sequence timing of generating endpoints; absent, none. */
  readonly generation?: GenerationTiming<Request> | undefined;
  /**
   * Whether every client shares one prefix cache (for a documented system prompt that all clients send): a client
   * can then learn, from `cached_tokens` or the time to its first token, whether another sent the same prompt
   * start. Off, each tenant (API key, else fairness key) has a partition of its own.
   * @default false
   */
  readonly sharedPrefixCache?: boolean | undefined;
  /**
   * Whether a refusal (503) keeps the engine's own message and `details` (see `toHttpError`).
   * @default false
   */
  readonly exposeDetails?: boolean | undefined;
}

/**
 * Creates an OpenAI endpoint: the body parsed by `parse` (a throw is answered 400 and never reaches a batcher), the
 * request keyed to its client (`clientKey`), then admitted and served by core's `serveBatched` (a client that
 * disconnects cancels its items; `X-Batch-*` headers at dispatch), answered by `complete` as JSON, or by `stream`
 * as Server-Sent Events when the body says `stream: true`. Every error is answered in OpenAI's shape
 * (`writeOpenAiError`), its status from core's `toHttpError`. Never rejects.
 *
 * @example
 * ```ts
 * const embeddings = createOpenAiEndpoint({
 *   parse: (body) => parseEmbeddingsRequest(body, model),
 *   complete: ({ request, call }) => embed(request, call),
 * });
 * app.post('/v1/embeddings', jsonBody(), (req, res) => embeddings(req.body, res));
 * ```
 */
export function createOpenAiEndpoint<Request, Answer>(
  options: OpenAiEndpointOptions<Request, Answer>,
): NodeJsonEndpoint {
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  const {
    parse,
    complete,
    serialize,
    stream,
    clientKey,
    generation,
    exposeDetails = false,
    sharedPrefixCache = false,
  } = options;
  checkBoolean('sharedPrefixCache', sharedPrefixCache);
  checkFunction('parse', parse);
  checkFunction('complete', complete);
  checkOptionalFunction('stream', stream);
  checkOptionalFunction('serialize', serialize);
  checkOptionalFunction('clientKey', clientKey);
  const errors: HttpErrorOptions = { exposeDetails: checkBoolean('exposeDetails', exposeDetails) };
  return async (body, res) => {
    let request: Request | undefined;
    let invalid: unknown;
    try {
      // Awaited only when it is a promise: most bodies are checked at once, and each await costs a turn.
      const parsed = parse(body);
      request = isPromiseLike(parsed) ? await parsed : parsed;
    } catch (error) {
      invalid = error;
    }
    // Fair shares per client (its address, or the operator's `clientKey`), never per OpenAI `user`: a client's many
    // `user` values share its one share, so inventing users gains nothing.
    const fairnessKey = fairnessKeyOf(res.req, clientKey);
    const tenant = prefixCacheTenant(res.req, fairnessKey, sharedPrefixCache);
    const exchange = (parsed: Request, call: CallOptions): EndpointCall<Request> =>
      timed({ request: parsed, call: { ...call, fairnessKey }, res, timers: undefined, tenant }, generation);
    // What `serveBatched` calls: the whole request, answered or streamed, as if it were one batched item.
    const target =
      stream !== undefined && streams(request)
        ? { streaming: true, stream: (parsed: Request, call: CallOptions) => stream(exchange(parsed, call)) }
        : { streaming: false, call: (parsed: Request, call: CallOptions) => complete(exchange(parsed, call)) };
    await serveBatched<Request, Answer>(target as unknown as Batcher<Request, Answer>, {
      res,
      readInput: () => {
        if (request === undefined) throw invalid;
        return request;
      },
      setHeaders: (headers) => {
        for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      },
      send:
        serialize === undefined
          ? (answer) => writeJson(res, 200, answer)
          : (answer) => writeJsonText(res, 200, serialize(answer)),
      sendError: (error) => writeOpenAiError(res, error, errors),
    });
  };
}

/** Whether a parsed request asks for a stream (`stream: true`, as completions and chat read it). */
function streams(request: unknown): boolean {
  return typeof request === 'object' && request !== null && (request as { readonly stream?: unknown }).stream === true;
}

/**
 * The exchange with a timer per sequence (for the metrics, and for the request's trace where it is traced), one
 * marked dispatched at each `onDispatch`: the sequences of a request arrived together, so whichever is marked, its
 * queue time is the right one. Called where the request is served, so the trace is the request's active span.
 */
function timed<Request>(
  exchange: EndpointCall<Request>,
  generation: GenerationTiming<Request> | undefined,
): EndpointCall<Request> {
  if (generation === undefined) return exchange;
  const count = generation.sequences(exchange.request);
  const { metrics } = generation;
  const timers = traceSequences(
    generation.model,
    generation.operation,
    count,
    metrics === undefined ? undefined : Array.from({ length: count }, () => metrics.start()),
  );
  if (timers === undefined) return exchange;
  let dispatched = 0;
  const { onDispatch } = exchange.call;
  return {
    ...exchange,
    timers,
    call: {
      ...exchange.call,
      onDispatch: (info) => {
        timers[dispatched++]?.dispatched();
        onDispatch?.(info);
      },
    },
  };
}
