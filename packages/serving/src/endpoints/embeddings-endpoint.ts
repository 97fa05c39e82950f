// OpenAI's `POST /v1/embeddings` on the endpoint skeleton: every input of a request one batched item costing its
// tokens, so inputs of one request and of concurrent requests share padded model calls.
import type { CallOptions } from '@microbatch/core';
import { fail } from '@microbatch/core/util';
import {
  type EmbeddingsRequest,
  type EmbeddingsRequestLimits,
  checkEmbeddingTokens,
  parseEmbeddingsRequest,
} from '../openai/embeddings-request.js';
import { type EmbeddingVectors, embeddingListJson } from '../openai/embedding-json.js';
import { normalized } from '../service/embedding-pooling.js';
import type { EmbeddingService } from '../service/embedding-service.js';
import type { ClientKey } from './client-key.js';
import { type NodeJsonEndpoint, createOpenAiEndpoint } from './openai-endpoint.js';

export { toBase64 } from '../openai/embedding-json.js';

/**
 * OpenAI's answer to `POST /v1/embeddings` (the JSON the endpoint writes, from the vectors themselves:
 * `embeddingListJson`).
 *
 * @example
 * ```ts
 * const [{ embedding }] = answer.data;
 * ```
 */
export interface EmbeddingList {
  readonly object: 'list';
  readonly data: ReadonlyArray<{
    readonly object: 'embedding';
    readonly index: number;
    /** Floats, or with `encoding_format: 'base64'` their little-endian float32 bytes in base64. */
    readonly embedding: readonly number[] | string;
  }>;
  readonly model: string;
  readonly usage: { readonly prompt_tokens: number; readonly total_tokens: number };
}

/**
 * Answers one `POST /v1/embeddings` request on a Node response, given its parsed JSON body.
 *
 * @example
 * ```ts
 * app.post('/v1/embeddings', jsonBody(), (req, res) => embeddings(req.body, res));
 * ```
 */
export type EmbeddingsEndpoint = NodeJsonEndpoint;

/**
 * Options of {@link createEmbeddingsEndpoint}.
 *
 * @example
 * ```ts
 * createEmbeddingsEndpoint(model, { limits: { maxInputs: 64 }, clientKey: clientKeyFromHeader('x-api-key-id') });
 * ```
 */
export interface EmbeddingsEndpointOptions {
  /** Bounds of a request beyond the model's own. */
  readonly limits?: EmbeddingsRequestLimits;
  /**
   * Who a request comes from, for fair shares of the queue and of each batch. OpenAI's `user` never is.
   * @default the client's address
   */
  readonly clientKey?: ClientKey;
  /**
   * Whether a refusal (503) keeps the engine's own message and `details`.
   * @default false
   */
  readonly exposeDetails?: boolean;
}

/**
 * Creates an OpenAI-compatible embeddings endpoint over an embedding model: every input of a request is one batched
 * item costing its token count, so inputs of one request and of concurrent requests share padded model calls
 * (at most the model's `maxBatchCost` tokens each). `dimensions` below the model's keeps the leading ones and
 * normalises again (models that allow it); usage counts the inputs' tokens. Each client has a fair share (its
 * address, or `clientKey`; never OpenAI's `user`). Invalid requests get a 400 naming the field; every error is in
 * OpenAI's shape, its status from core's `toHttpError`. Never rejects.
 *
 * @example
 * ```ts
 * const embeddings = createEmbeddingsEndpoint(model);
 * app.post('/v1/embeddings', jsonBody(), (req, res) => embeddings(req.body, res));
 * ```
 */
export function createEmbeddingsEndpoint(
  model: EmbeddingService,
  options: EmbeddingsEndpointOptions = {},
): EmbeddingsEndpoint {
  if (typeof model !== 'object' || model === null || typeof model.embedAll !== 'function') {
    fail('model', 'an embedding model from `createEmbeddingModel()`', model);
  }
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
  const { limits = {}, clientKey, exposeDetails } = options;
  return createOpenAiEndpoint<EmbeddingsRequest, EmbeddingVectors>({
    parse: (body) => parseEmbeddingsRequest(body, model, limits),
    complete: ({ request, call }) => embedAll(model, request, call),
    serialize: embeddingListJson,
    clientKey,
    exposeDetails,
  });
}

async function embedAll(
  model: EmbeddingService,
  request: EmbeddingsRequest,
  call: CallOptions,
): Promise<EmbeddingVectors> {
  // Texts are tokenized on the model's tokenizer thread, never this one; until it is loaded, 503 UNAVAILABLE.
  const texts = request.inputs.filter((input): input is string => typeof input === 'string');
  const encoded = texts.length === 0 ? [] : await model.encodeAll(texts);
  let next = 0;
  const ids = request.inputs.map((input, index) =>
    typeof input === 'string'
      ? checkEmbeddingTokens(encoded[next++] as number[], request.fields[index] as string, model.maxTokens)
      : input,
  );
  const vectors = await model.embedAll(ids, call);
  let tokens = 0;
  for (const one of ids) tokens += one.length;
  return {
    vectors: vectors.map((full) =>
      request.dimensions === full.length
        ? full
        : model.normalize
          ? normalized(full.slice(0, request.dimensions))
          : full.slice(0, request.dimensions),
    ),
    base64: request.encoding === 'base64',
    model: model.id,
    tokens,
  };
}
