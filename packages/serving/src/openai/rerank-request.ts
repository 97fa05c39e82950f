// The rerank body (`POST /v1/rerank`, `/rerank`) in the Jina / Cohere shape, as vLLM and TEI read it: checked field
// by field (a bad one is a 400 naming it) into one tokenized (query, document) pair per document.
import { describeValue as describe } from '@microbatch/core';
import {
  type EncoderModel,
  type EncoderRequestLimits,
  bodyFields,
  checkModelField,
  encoderLimits,
  readList,
  readText,
  tokenBudget,
} from './encoder-fields.js';
import { invalidField, isAbsent } from './request-fields.js';

/**
 * A checked rerank request: one tokenized pair per document, in order.
 *
 * @example
 * ```ts
 * const { items, topN, returnDocuments } = parseRerankRequest(req.body, model);
 * ```
 */
export interface RerankRequest<Item> {
  readonly query: string;
  readonly documents: readonly string[];
  /** `(query, document)` as the cross-encoder reads it, per document. */
  readonly items: readonly Item[];
  /** How many of the best results are returned (at most the number of documents). */
  readonly topN: number;
  /** Whether each result carries its document (`{ text }`). */
  readonly returnDocuments: boolean;
}

/**
 * Checks an untrusted rerank body: `query` (a non-empty string), `documents` (1 to `maxDocuments` strings or
 * `{ text }` objects), `top_n` (an integer from 1; more than the documents returns them all), `return_documents`
 * (a boolean; default true, as vLLM and Jina), `model`. Pairs are tokenized here, so one past the model's length is
 * a 400 naming it and the bound before anything is queued.
 *
 * @example
 * ```ts
 * parseRerankRequest({ query: 'capital of France', documents: ['Paris', 'Berlin'], top_n: 1 }, model).topN; // 1
 * ```
 */
export function parseRerankRequest<Item>(
  body: unknown,
  model: EncoderModel<Item>,
  limits: EncoderRequestLimits = {},
): RerankRequest<Item> {
  const { maxDocuments, maxInputChars, maxRequestTokens } = encoderLimits(limits);
  const fields = bodyFields(body);
  checkModelField(fields.model);
  const query = readText(fields.query, 'query', maxInputChars);
  const list = readList(fields.documents, 'documents', maxDocuments, 'strings or {"text": string} objects');
  const documents = list.map((document, index) => {
    const field = `documents[${index}]`;
    if (typeof document === 'object' && document !== null && !Array.isArray(document)) {
      return readText((document as { text?: unknown }).text, `${field}.text`, maxInputChars);
    }
    if (typeof document !== 'string') {
      throw invalidField(field, `\`${field}\` must be a string or {"text": string}, got ${describe(document)}`);
    }
    return readText(document, field, maxInputChars);
  });
  const { top_n: topN, return_documents: returnDocuments } = fields;
  if (!isAbsent(topN) && (!Number.isSafeInteger(topN) || (topN as number) < 1)) {
    throw invalidField('top_n', `\`top_n\` must be an integer of at least 1, got ${describe(topN)}`);
  }
  if (!isAbsent(returnDocuments) && typeof returnDocuments !== 'boolean') {
    throw invalidField('return_documents', `\`return_documents\` must be a boolean, got ${describe(returnDocuments)}`);
  }
  const counted = tokenBudget(model, maxRequestTokens, 'documents');
  const items = documents.map((document, index) => counted(model.tokenizePair(query, document), `documents[${index}]`));
  return {
    query,
    documents,
    items,
    topN: Math.min(isAbsent(topN) ? documents.length : (topN as number), documents.length),
    returnDocuments: returnDocuments !== false,
  };
}
