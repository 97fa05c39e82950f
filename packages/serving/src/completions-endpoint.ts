import { setMaxListeners } from 'node:events';
import type { ServerResponse } from 'node:http';
import { type HttpErrorOptions, serveBatched, writeHttpError, writeJson } from '@microbatch/core/http';
import type { Batcher, CallOptions, StreamingBatcher } from '@microbatch/core';
import type { TextGenerationOutput, TokenUsage } from '@microbatch/inference';
import type { GenerationMetrics, SequenceTimer } from '@microbatch/prometheus';
import { type CompletionRequest, type CompletionRequestLimits, parseCompletionRequest } from './completion-request.js';
import {
  type Completion,
  completionMeta,
  setDecodeBatchHeaders,
  toCompletion,
  toCompletionChunk,
  toUsageChunk,
} from './completion-response.js';
import { type ClientKey, fairnessKeyOf } from './client-key.js';
import { traceSequences } from './generation-trace.js';
import { mergeStreams } from './merge-streams.js';
import type { TextCompletionService } from './text-completion-model.js';

// Node's default (10) plus what the request itself adds beside its prompts' listeners.
const MAX_LISTENERS_SLACK = 10;

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
export type CompletionsModel = Pick<TextCompletionService, 'id' | 'generate' | 'streamer' | 'validate'>;

/** What {@link serveBatched} calls: a whole request, answered or streamed, as if it were one batched item. */
type RequestBatcher = Pick<Batcher<CompletionRequest, Completion>, 'streaming' | 'call'>;
type StreamingRequestBatcher = Pick<StreamingBatcher<CompletionRequest, Completion>, 'streaming' | 'stream'>;

/**
 * Creates an OpenAI-compatible completions endpoint over a text-completion model, for any framework whose response
 * is a Node `ServerResponse` (Express, Koa's `ctx.res`, Nest on Express). Each prompt of the request is one batched
 * item, so the prompts of an array (and of concurrent requests) share model calls; the outputs come back as one
 * `text_completion` with indexed choices. With `stream: true`, each decoded piece is sent as an OpenAI chunk
 * (`data: {...}`) as soon as it exists, then `data: [DONE]`. Invalid requests get 400 naming the field and never
 * reach the model; a client that disconnects cancels its items. Errors are mapped by `toHttpError` with `errors`
 * (`exposeDetails`). Never rejects.
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
export function createCompletionsEndpoint(
  model: CompletionsModel,
  limits: CompletionRequestLimits = {},
  clientKey?: ClientKey,
  generation?: Pick<GenerationMetrics, 'start'>,
  errors: HttpErrorOptions = {},
): CompletionsEndpoint {
  if (clientKey !== undefined && typeof clientKey !== 'function') {
    throw new TypeError(`Expected \`clientKey\` to be a function, got ${typeof clientKey}`);
  }
  if (typeof model !== 'object' || model === null || typeof model.validate !== 'function') {
    throw new TypeError('Expected `model` to be a text-completion model from `createTextCompletionModel()`');
  }
  return async (body, res) => {
    let request: CompletionRequest | undefined;
    let invalid: unknown;
    try {
      request = parseCompletionRequest(body, model.validate, limits);
    } catch (error) {
      invalid = error;
    }
    // Fair shares per client (its address, or the operator's `clientKey`), never per OpenAI `user`: a client's many
    // `user` values share its one share, so inventing users gains nothing.
    const fairnessKey = fairnessKeyOf(res.req, clientKey);
    const target: RequestBatcher | StreamingRequestBatcher =
      request?.stream === true
        ? {
            streaming: true,
            stream: (parsed, call) =>
              streamAll(model, parsed, timed(model.id, parsed, { ...call, fairnessKey }, generation), res),
          }
        : {
            streaming: false,
            call: (parsed, call) =>
              completeAll(model, parsed, timed(model.id, parsed, { ...call, fairnessKey }, generation), res),
          };
    // Core's request path does the rest: disconnect → cancellation, `X-Batch-*` headers at dispatch, SSE, errors.
    await serveBatched<CompletionRequest, Completion>(target as Batcher<CompletionRequest, Completion>, {
      res,
      readInput: () => {
        if (request === undefined) throw invalid;
        return request;
      },
      setHeaders: (headers) => {
        for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      },
      send: (completion) => writeJson(res, 200, completion),
      sendError: (error) => writeHttpError(res, error, errors),
    });
  };
}

/** The call options of a request, with a generation timer per prompt when metrics are kept. */
interface TimedCall {
  readonly call: CallOptions;
  readonly timers: readonly SequenceTimer[] | undefined;
}

/**
 * Starts a timer per prompt (for the metrics, and for the request's trace where it is traced) and marks one
 * dispatched at each `onDispatch` (the prompts of a request arrived together, so whichever is marked, its queue
 * time is the right one).
 */
function timed(model: string, request: CompletionRequest, call: CallOptions, generation: TimedGeneration): TimedCall {
  const count = request.inputs.length;
  const timers = traceSequences(
    model,
    count,
    generation === undefined ? undefined : request.inputs.map(() => generation.start()),
  );
  if (timers === undefined) return { call, timers: undefined };
  let dispatched = 0;
  const { onDispatch } = call;
  return {
    timers,
    call: {
      ...call,
      onDispatch: (info) => {
        timers[dispatched++]?.dispatched();
        onDispatch?.(info);
      },
    },
  };
}
type TimedGeneration = Pick<GenerationMetrics, 'start'> | undefined;

/** Every prompt of the request as one item; a failed prompt cancels its siblings, whose answers are useless. */
async function completeAll(
  model: CompletionsModel,
  request: CompletionRequest,
  { call, timers }: TimedCall,
  res: ServerResponse,
): Promise<Completion> {
  const done = new AbortController();
  const signal = call.signal === undefined ? done.signal : AbortSignal.any([call.signal, done.signal]);
  // One abort listener per prompt (up to `maxPrompts`) is expected, not a leak: no MaxListenersExceededWarning.
  setMaxListeners(request.inputs.length + MAX_LISTENERS_SLACK, signal);
  try {
    // Admitted all together or refused together: a request is never half started when it is refused.
    const outputs: TextGenerationOutput[] = await model.generate.callAll(request.inputs, { ...call, signal });
    setDecodeBatchHeaders(res, outputs);
    outputs.forEach((output, index) => timers?.[index]?.finished(output.usage));
    return toCompletion(completionMeta(model.id), outputs);
  } catch (error) {
    for (const timer of timers ?? []) timer.failed(error);
    throw error;
  } finally {
    done.abort();
  }
}

async function* streamAll(
  model: CompletionsModel,
  request: CompletionRequest,
  { call, timers }: TimedCall,
  res: ServerResponse,
): AsyncGenerator<Completion, void, undefined> {
  const meta = completionMeta(model.id);
  const usages: TokenUsage[] = [];
  if (call.signal !== undefined) setMaxListeners(request.inputs.length + MAX_LISTENERS_SLACK, call.signal);
  let first = true;
  try {
    for await (const [index, chunk] of mergeStreams(model.streamer.streamAll(request.inputs, call))) {
      // Pulled before the headers go out: the first chunk's batch is what the headers can still say.
      if (first) setDecodeBatchHeaders(res, [chunk]);
      first = false;
      const timer = timers?.[index];
      timer?.token();
      if (chunk.usage !== null) {
        usages.push(chunk.usage);
        timer?.finished(chunk.usage);
      }
      yield toCompletionChunk(meta, index, chunk);
    }
  } catch (error) {
    for (const timer of timers ?? []) timer.failed(error);
    throw error;
  } finally {
    // A client that left: its sequences are no longer running (a finished or failed timer ignores this).
    for (const timer of timers ?? []) timer.failed(undefined);
  }
  if (request.includeUsage) yield toUsageChunk(meta, usages);
}
