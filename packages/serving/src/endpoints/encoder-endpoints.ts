// The encoder endpoints on the OpenAI endpoint skeleton, over one `ClassifierService`: rerank (Jina / Cohere shape,
// `POST /v1/rerank` and `/rerank`), score (vLLM's `POST /v1/score`) and classify (vLLM's `POST /classify`). A
// request's texts or pairs are tokenized on the service's tokenizer thread, then are one all-or-none group of batched
// items costing their tokens, so the documents of one query and those of concurrent requests share padded calls.
import { randomBytes } from 'node:crypto';
import type { CallOptions } from '@microbatch/core';
import { fail } from '@microbatch/core/util';
import {
  type EncoderRequestLimits,
  type EncoderTexts,
  checkTokenCounts,
  encoderLimits,
} from '../openai/encoder-fields.js';
import { parseClassifyRequest } from '../openai/classify-request.js';
import { parseRerankRequest } from '../openai/rerank-request.js';
import { parseScoreRequest } from '../openai/score-request.js';
import type { ClassifierItem, ClassifierService } from '../service/classifier-service.js';
import type { ClientKey } from './client-key.js';
import { type NodeJsonEndpoint, createOpenAiEndpoint } from './openai-endpoint.js';

/**
 * The answer to a rerank request: the `top_n` best documents, best first.
 *
 * @example
 * ```ts
 * const [{ index, relevance_score }] = answer.results;
 * ```
 */
export interface RerankAnswer {
  readonly id: string;
  readonly model: string;
  readonly usage: { readonly total_tokens: number };
  readonly results: ReadonlyArray<{
    /** The document's position in the request's `documents`. */
    readonly index: number;
    /** The sigmoid of the cross-encoder's logit for (query, document). */
    readonly relevance_score: number;
    readonly document?: { readonly text: string };
  }>;
}

/**
 * vLLM's answer to `POST /v1/score`: one score per pair, in request order.
 *
 * @example
 * ```ts
 * const [{ score }] = answer.data;
 * ```
 */
export interface ScoreAnswer {
  readonly id: string;
  readonly object: 'list';
  readonly created: number;
  readonly model: string;
  readonly data: ReadonlyArray<{ readonly index: number; readonly object: 'score'; readonly score: number }>;
  readonly usage: { readonly prompt_tokens: number; readonly total_tokens: number };
}

/**
 * vLLM's answer to `POST /classify`: per input, the most probable label and every label's probability in the
 * model's label order (`id2label`).
 *
 * @example
 * ```ts
 * const [{ label, probs }] = answer.data;
 * ```
 */
export interface ClassifyAnswer {
  readonly id: string;
  readonly object: 'list';
  readonly created: number;
  readonly model: string;
  readonly data: ReadonlyArray<{
    readonly index: number;
    readonly object: 'classify';
    readonly label: string;
    readonly probs: readonly number[];
    readonly num_classes: number;
  }>;
  readonly usage: { readonly prompt_tokens: number; readonly total_tokens: number; readonly completion_tokens: 0 };
}

/**
 * Options of the encoder endpoints.
 *
 * @example
 * ```ts
 * createRerankEndpoint(reranker, { limits: { maxDocuments: 100 } });
 * ```
 */
export interface EncoderEndpointOptions {
  /** Bounds of a request beyond the model's own. */
  readonly limits?: EncoderRequestLimits;
  /**
   * Who a request comes from, for fair shares of the queue and of each batch.
   * @default the client's address
   */
  readonly clientKey?: ClientKey;
  /**
   * Whether a refusal (503) keeps the engine's own message and `details`.
   * @default false
   */
  readonly exposeDetails?: boolean;
}

function checkService(service: ClassifierService, options: EncoderEndpointOptions): void {
  if (typeof service !== 'object' || service === null || typeof service.classifyAll !== 'function') {
    fail('service', 'a classifier from `createSequenceClassifier()`', service);
  }
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
}

/**
 * The limits with `maxDocuments` within the service's queue: one request's items are admitted together, so a request
 * larger than the queue could never be admitted (a 503 it would retry forever). Unset, it is lowered to the queue's
 * size; set past it, a `TypeError` naming both. The multi-model app applies it to each rerank and classify model.
 *
 * @example
 * ```ts
 * documentLimits(reranker, {}).maxDocuments; // 1000, or the queue's size when smaller
 * ```
 */
export function documentLimits(service: ClassifierService, limits: EncoderRequestLimits): EncoderRequestLimits {
  const queue = service.maxQueueSize;
  if (limits.maxDocuments === undefined) return { ...limits, maxDocuments: Math.min(1000, queue) };
  if (limits.maxDocuments > queue) {
    throw new TypeError(
      `Expected \`limits.maxDocuments\` (${limits.maxDocuments}) to be at most the model's \`maxQueueSize\` (${queue}): a request's documents are admitted together`,
    );
  }
  return limits;
}

/**
 * A request's texts or pairs tokenized on the service's tokenizer thread (the main thread never tokenizes), their
 * counts checked against the model's and the request's bounds (a 400 naming the field), before anything is queued.
 */
async function encode(
  service: ClassifierService,
  wanted: EncoderTexts,
  limits: EncoderRequestLimits,
): Promise<ClassifierItem[]> {
  const { maxRequestTokens } = encoderLimits(limits);
  const { items, stoppedAt } = await service.encodeAll(wanted.texts, {
    ...(wanted.pairs === undefined ? {} : { pairs: wanted.pairs }),
    maxTotal: maxRequestTokens,
  });
  checkTokenCounts(
    items.map((item) => service.tokens(item)),
    stoppedAt,
    wanted,
    service.maxTokens,
    maxRequestTokens,
  );
  return items;
}

const tokensOf = (service: ClassifierService, items: readonly ClassifierItem[]): number =>
  items.reduce((sum, item) => sum + service.tokens(item), 0);
const newId = (kind: string) => `${kind}-${randomBytes(12).toString('hex')}`;

/** What an encoder endpoint maker returns: the endpoint over a service, with its options. */
export type EncoderEndpointFactory = (service: ClassifierService, options?: EncoderEndpointOptions) => NodeJsonEndpoint;

/**
 * The skeleton of the three encoder endpoints: the request parsed against the limits, its texts or pairs encoded and
 * checked ({@link encode}), then `answer` over the items (which calls the service with the request's `call`).
 */
function encoderEndpoint<Request extends { readonly wanted: EncoderTexts }, Answer>(
  parse: (body: unknown, limits: EncoderRequestLimits) => Request,
  answer: (service: ClassifierService, request: Request, items: ClassifierItem[], call: CallOptions) => Promise<Answer>,
): EncoderEndpointFactory {
  return (service, options = {}) => {
    checkService(service, options);
    const { limits = {}, clientKey, exposeDetails } = options;
    return createOpenAiEndpoint({
      parse: (body) => parse(body, limits),
      complete: async ({ request, call }): Promise<Answer> =>
        answer(service, request, await encode(service, request.wanted, limits), call),
      clientKey,
      exposeDetails,
    });
  };
}

/** vLLM's list answer (score, classify): one entry per item in request order, the items' tokens as usage. */
function listAnswer<Kind extends 'score' | 'classify', Entry>(
  kind: Kind,
  service: ClassifierService,
  items: readonly ClassifierItem[],
  data: readonly Entry[],
) {
  const tokens = tokensOf(service, items);
  return {
    id: newId(kind),
    object: 'list' as const,
    created: Math.floor(Date.now() / 1000),
    model: service.id,
    data: data.map((entry, index) => ({ index, object: kind, ...entry })),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}

/**
 * Creates the rerank endpoint (`POST /v1/rerank`, `/rerank`, the Jina / Cohere shape): each document paired with the
 * query is one batched item, the request's documents admitted all together or refused together; the answer lists
 * the `top_n` best, best first. Invalid requests get a 400 naming the field; every error in OpenAI's shape. Never
 * rejects.
 *
 * @example
 * ```ts
 * const rerank = createRerankEndpoint(createSequenceClassifier({ model, task: 'rerank' }));
 * app.post('/v1/rerank', jsonBody(), (req, res) => rerank(req.body, res));
 * ```
 */
export const createRerankEndpoint: EncoderEndpointFactory = encoderEndpoint(
  parseRerankRequest,
  async (service, request, items, call): Promise<RerankAnswer> => {
    const scores = await service.scoreAll(items, call);
    const order = scores.map((_, index) => index).sort((a, b) => (scores[b] as number) - (scores[a] as number));
    return {
      id: newId('rerank'),
      model: service.id,
      usage: { total_tokens: tokensOf(service, items) },
      results: order.slice(0, request.topN).map((index) => ({
        index,
        relevance_score: scores[index] as number,
        ...(request.returnDocuments ? { document: { text: request.documents[index] as string } } : {}),
      })),
    };
  },
);

/**
 * Creates vLLM's score endpoint (`POST /v1/score`): `text_1` against one or many `text_2`, each pair one batched
 * item of the cross-encoder, a request's pairs admitted all together or refused together. Never rejects.
 *
 * @example
 * ```ts
 * app.post('/v1/score', jsonBody(), (req, res) => createScoreEndpoint(reranker)(req.body, res));
 * ```
 */
export const createScoreEndpoint: EncoderEndpointFactory = encoderEndpoint(
  parseScoreRequest,
  async (service, _request, items, call): Promise<ScoreAnswer> => {
    const scores = await service.scoreAll(items, call);
    return listAnswer(
      'score',
      service,
      items,
      scores.map((score) => ({ score })),
    );
  },
);

/**
 * Creates vLLM's classify endpoint (`POST /classify`): each input one batched item, a request's inputs admitted all
 * together or refused together; per input the most probable label and every label's probability. Never rejects.
 *
 * @example
 * ```ts
 * app.post('/classify', jsonBody(), (req, res) => createClassifyEndpoint(classifier)(req.body, res));
 * ```
 */
export const createClassifyEndpoint: EncoderEndpointFactory = encoderEndpoint(
  parseClassifyRequest,
  async (service, _request, items, call): Promise<ClassifyAnswer> => {
    const all = await service.classifyAll(items, call);
    const list = listAnswer(
      'classify',
      service,
      items,
      all.map((probabilities) => {
        let best = 0;
        for (let i = 1; i < probabilities.length; i += 1) {
          if ((probabilities[i] as number) > (probabilities[best] as number)) best = i;
        }
        return {
          label: service.labels[best] as string,
          probs: Array.from(probabilities),
          num_classes: probabilities.length,
        };
      }),
    );
    return { ...list, usage: { ...list.usage, completion_tokens: 0 } };
  },
);
