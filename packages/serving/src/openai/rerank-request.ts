// The rerank body (`POST /v1/rerank`, `/rerank`) in the Jina / Cohere shape, as vLLM and TEI read it: checked field
// by field (a bad one is a 400 naming it) into the (query, document) pairs to tokenize.
import { describeValue as describe } from '@microbatch/core';
import {
  type EncoderRequestLimits,
  type EncoderTexts,
  bodyFields,
  checkModelField,
  encoderLimits,
  readList,
  readText,
} from './encoder-fields.js';
import { invalidField, isAbsent } from './request-fields.js';

/**
 * A checked rerank request: the query, its documents, and the pairs to tokenize (one per document, in order).
 *
 * @example
 * ```ts
 * const { wanted, topN, returnDocuments } = parseRerankRequest(req.body);
 * ```
 */
export interface RerankRequest {
  readonly query: string;
  readonly documents: readonly string[];
  /** `(query, document)` per document, as the cross-encoder reads it. */
  readonly wanted: EncoderTexts;
  /** How many of the best results are returned (at most the number of documents). */
  readonly topN: number;
  /** Whether each result carries its document (`{ text }`). */
  readonly returnDocuments: boolean;
}

/**
 * Checks an untrusted rerank body: `query` (a non-empty string), `documents` (1 to `maxDocuments` strings or
 * `{ text }` objects), `top_n` (an integer from 1; more than the documents returns them all), `return_documents`
 * (a boolean; default true, as vLLM and Jina), `model`. Every problem throws `BatchError('INVALID_INPUT')` naming
 * the field; the pairs' token counts are checked once tokenized (`checkTokenCounts`).
 *
 * @example
 * ```ts
 * parseRerankRequest({ query: 'capital of France', documents: ['Paris', 'Berlin'], top_n: 1 }).topN; // 1
 * ```
 */
export function parseRerankRequest(body: unknown, limits: EncoderRequestLimits = {}): RerankRequest {
  const { maxDocuments, maxInputChars } = encoderLimits(limits);
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
  return {
    query,
    documents,
    wanted: {
      texts: documents.map(() => query),
      pairs: documents,
      fields: documents.map((_, index) => `documents[${index}]`),
      listField: 'documents',
    },
    topN: Math.min(isAbsent(topN) ? documents.length : (topN as number), documents.length),
    returnDocuments: returnDocuments !== false,
  };
}
