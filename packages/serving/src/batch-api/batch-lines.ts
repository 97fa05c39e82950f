// How one batch line is answered: its body goes through the same endpoint as an interactive request (the same
// parsing, limits, service and answer), on a response that is captured rather than sent, with the service's
// batchers called at the lowest priority under the Batch API's own fairness key.
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { Batcher, CallOptions, StreamingBatcher } from '@microbatch/core';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import type { NodeJsonEndpoint } from '../endpoints/openai-endpoint.js';
import type { EmbeddingService } from '../service/embedding-service.js';
import type { TextCompletionService } from '../service/text-completion-service.js';

/**
 * The priority of every batch line's items: below an interactive request's (0, core's default), so that within a
 * batch key an interactive item queued beside batch lines is dispatched first.
 */
export const BATCH_PRIORITY = -1;

/** The fairness key every batch line's items carry: the Batch API is one client among the others. */
export const BATCH_FAIRNESS_KEY = 'microbatch:batch-api';

/** A line's answer: what the interactive endpoint would have sent, status and parsed JSON body. */
export interface LineAnswer {
  readonly status: number;
  readonly body: unknown;
}

/**
 * Answers one line's body (never rejects); `undefined` when `signal` aborted first: the line was preempted, it has
 * no answer.
 */
export type LineEndpoint = (body: unknown, signal?: AbortSignal) => Promise<LineAnswer | undefined>;

/**
 * `endpoint`'s answer to `body`, captured: the endpoint writes status, headers and JSON on a response that has no
 * connection, and the written bytes are read back. When `signal` aborts before the answer is written, the response
 * is closed as a client that went away closes it (the endpoint cancels the line's items, and a decode loop drops its
 * rows at its next step) and the result is `undefined`.
 *
 * @example
 * ```ts
 * const { status, body } = await captureAnswer(completions, { prompt: 'Once', max_tokens: 8 });
 * ```
 */
export function captureAnswer(
  endpoint: NodeJsonEndpoint,
  body: unknown,
  signal?: AbortSignal,
): Promise<LineAnswer | undefined> {
  if (signal?.aborted === true) return Promise.resolve(undefined);
  const req = new IncomingMessage(new Socket());
  req.method = 'POST';
  const res = new ServerResponse(req);
  const chunks: Buffer[] = [];
  const collect = (chunk: unknown): void => {
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk as Uint8Array));
  };
  return new Promise<LineAnswer | undefined>((resolve) => {
    const onAbort = (): void => {
      // `destroyed` before `close`: a watch that starts after this sees a response already gone.
      res.destroy();
      res.emit('close');
      resolve(undefined);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    res.write = ((chunk: unknown) => {
      collect(chunk);
      return true;
    }) as typeof res.write;
    res.end = ((chunk?: unknown) => {
      signal?.removeEventListener('abort', onAbort);
      collect(chunk);
      const text = Buffer.concat(chunks).toString('utf8');
      let parsed: unknown = null;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = { error: { message: 'The endpoint answered no JSON', type: 'server_error', param: null, code: null } };
      }
      resolve({ status: res.statusCode, body: parsed });
      return res;
    }) as typeof res.end;
    void endpoint(body, res);
  });
}

/** A {@link lowPriorityService}: the service, and how many of the batch lines' items it has in flight now. */
export interface LowPriorityService extends TextCompletionService {
  readonly itemsInFlight: () => number;
}

/**
 * `service` with its batchers called at {@link BATCH_PRIORITY} under {@link BATCH_FAIRNESS_KEY}, whatever the
 * endpoint sets: what the Batch API builds its endpoints over.
 *
 * @example
 * ```ts
 * const completions = createCompletionsEndpoint(lowPriorityService(service), { limits });
 * ```
 */
export function lowPriorityService(service: TextCompletionService): LowPriorityService {
  const low = (call: CallOptions | undefined): CallOptions => ({
    ...call,
    priority: BATCH_PRIORITY,
    fairnessKey: BATCH_FAIRNESS_KEY,
  });
  const { generate, streamer } = service;
  let items = 0;
  const counted = async <T>(count: number, run: () => Promise<T>): Promise<T> => {
    items += count;
    try {
      return await run();
    } finally {
      items -= count;
    }
  };
  const lowGenerate = {
    ...pickBatcher(generate),
    call: (input: TextGenerationInput, call?: CallOptions) => counted(1, () => generate.call(input, low(call))),
    callAll: (inputs: readonly TextGenerationInput[], call?: CallOptions) =>
      counted(inputs.length, () => generate.callAll(inputs, low(call))),
  } as unknown as Batcher<TextGenerationInput, TextGenerationOutput>;
  const lowStreamer = {
    ...pickBatcher(streamer),
    stream: (input: TextGenerationInput, call?: CallOptions) => streamer.stream(input, low(call)),
    streamAll: (inputs: readonly TextGenerationInput[], call?: CallOptions) => streamer.streamAll(inputs, low(call)),
  } as unknown as StreamingBatcher<TextGenerationInput, TextGenerationChunk>;
  return {
    itemsInFlight: () => items,
    id: service.id,
    generate: lowGenerate,
    streamer: lowStreamer,
    ...(service.chatTemplate === undefined ? {} : { chatTemplate: service.chatTemplate }),
    batchers: service.batchers,
    ready: service.ready,
    isReady: () => service.isReady(),
    validate: (body) => service.validate(body),
    // Counted off the main thread as for interactive requests: a batch of long prompts must not hold the event loop.
    ...(service.validateOffThread === undefined ? {} : { validateOffThread: service.validateOffThread }),
    drain: () => service.drain(),
    close: () => service.close(),
  };
}

/** The batcher's read-only facts (what the endpoints may read beside the calls). */
function pickBatcher(batcher: Batcher<never, unknown> | StreamingBatcher<never, unknown>): object {
  return { streaming: batcher.streaming, name: batcher.name };
}

/** A {@link lowPriorityEmbeddings}: the service, and how many of the batch lines' inputs it has in flight now. */
export interface LowPriorityEmbeddings extends EmbeddingService {
  readonly itemsInFlight: () => number;
}

/**
 * `service` with `embed` / `embedAll` called at {@link BATCH_PRIORITY} under {@link BATCH_FAIRNESS_KEY}: what the
 * Batch API builds its embeddings endpoint over.
 *
 * @example
 * ```ts
 * const embeddings = createEmbeddingsEndpoint(lowPriorityEmbeddings(model), { limits });
 * ```
 */
export function lowPriorityEmbeddings(service: EmbeddingService): LowPriorityEmbeddings {
  let items = 0;
  const low = (call: CallOptions | undefined): CallOptions => ({
    ...call,
    priority: BATCH_PRIORITY,
    fairnessKey: BATCH_FAIRNESS_KEY,
  });
  const counted = async <T>(count: number, run: () => Promise<T>): Promise<T> => {
    items += count;
    try {
      return await run();
    } finally {
      items -= count;
    }
  };
  return {
    itemsInFlight: () => items,
    // Read through: a model's facts are known once it has loaded.
    get id() {
      return service.id;
    },
    get dimensions() {
      return service.dimensions;
    },
    get maxTokens() {
      return service.maxTokens;
    },
    get vocabSize() {
      return service.vocabSize;
    },
    get pooling() {
      return service.pooling;
    },
    get normalize() {
      return service.normalize;
    },
    get truncatableDimensions() {
      return service.truncatableDimensions;
    },
    batcher: service.batcher,
    batchers: service.batchers,
    ready: service.ready,
    isReady: () => service.isReady(),
    tokenize: (text) => service.tokenize(text),
    encodeAll: (texts) => service.encodeAll(texts),
    embed: (ids, call) => counted(1, () => service.embed(ids, low(call))),
    embedAll: (ids, call) => counted(ids.length, () => service.embedAll(ids, low(call))),
    drain: () => service.drain(),
    close: () => service.close(),
  };
}
