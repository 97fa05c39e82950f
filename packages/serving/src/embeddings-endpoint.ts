import type { ServerResponse } from 'node:http';
import type { Batcher, CallOptions } from '@microbatch/core';
import { type HttpErrorOptions, serveBatched, writeJson } from '@microbatch/core/http';
import type { EmbeddingService } from './embedding-model.js';
import { normalized } from './embedding-pooling.js';
import { type EmbeddingsRequest, type EmbeddingsRequestLimits, parseEmbeddingsRequest } from './embeddings-request.js';
import { writeOpenAiError } from './openai-error.js';

/**
 * OpenAI's answer to `POST /v1/embeddings`.
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
export type EmbeddingsEndpoint = (body: unknown, res: ServerResponse) => Promise<void>;

/** A little-endian float32 vector in base64, as the official clients decode it. */
function toBase64(vector: Float32Array): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, index) => bytes.writeFloatLE(value, index * 4));
  return bytes.toString('base64');
}

/**
 * Creates an OpenAI-compatible embeddings endpoint over an embedding model: every input of a request is one batched
 * item costing its token count, so inputs of one request and of concurrent requests share padded model calls
 * (at most the model's `maxBatchCost` tokens each). `dimensions` below the model's keeps the leading ones and
 * normalises again (models that allow it); usage counts the inputs' tokens. Invalid requests get a 400 naming the
 * field, in OpenAI's error shape; errors are mapped by `toHttpError` with `errors` (`exposeDetails`). Never rejects.
 *
 * @example
 * ```ts
 * const embeddings = createEmbeddingsEndpoint(model);
 * app.post('/v1/embeddings', jsonBody(), (req, res) => embeddings(req.body, res));
 * ```
 */
export function createEmbeddingsEndpoint(
  model: EmbeddingService,
  limits: EmbeddingsRequestLimits = {},
  errors: HttpErrorOptions = {},
): EmbeddingsEndpoint {
  const embedAll = async (request: EmbeddingsRequest, call: CallOptions): Promise<EmbeddingList> => {
    const vectors = await model.embedAll(request.ids, call);
    let tokens = 0;
    for (const ids of request.ids) tokens += ids.length;
    return {
      object: 'list',
      data: vectors.map((full, index) => {
        const vector =
          request.dimensions === full.length
            ? full
            : model.normalize
              ? normalized(full.slice(0, request.dimensions))
              : full.slice(0, request.dimensions);
        return {
          object: 'embedding',
          index,
          embedding: request.encoding === 'base64' ? toBase64(vector) : Array.from(vector),
        };
      }),
      model: model.id,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  };
  return async (body, res) => {
    let request: EmbeddingsRequest | undefined;
    let invalid: unknown;
    try {
      // Texts are tokenized here: until the tokenizer is loaded, `tokenize` refuses them (503 UNAVAILABLE).
      request = parseEmbeddingsRequest(body, model, limits);
    } catch (error) {
      invalid = error;
    }
    const fairnessKey = request?.user ?? res.req?.socket?.remoteAddress;
    const target = {
      streaming: false as const,
      call: (parsed: EmbeddingsRequest, call: CallOptions) => embedAll(parsed, { ...call, fairnessKey }),
    };
    await serveBatched<EmbeddingsRequest, EmbeddingList>(
      target as unknown as Batcher<EmbeddingsRequest, EmbeddingList>,
      {
        res,
        readInput: () => {
          if (request === undefined) throw invalid;
          return request;
        },
        setHeaders: (headers) => {
          for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
        },
        send: (answer) => writeJson(res, 200, answer),
        sendError: (error) => writeOpenAiError(res, error, errors),
      },
    );
  };
}
