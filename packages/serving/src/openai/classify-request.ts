// vLLM's `POST /classify` body: `input` a text or a list of texts, checked (a bad one is a 400 naming it) into the
// texts to tokenize, one per input.
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
import { invalidField } from './request-fields.js';

/**
 * A checked classify request: the texts to tokenize, one per input, in order.
 *
 * @example
 * ```ts
 * const { wanted } = parseClassifyRequest({ input: ['great', 'awful'] }); // 2 texts
 * ```
 */
export interface ClassifyRequest {
  readonly wanted: EncoderTexts;
}

/**
 * Checks an untrusted classify body: `input` (a non-empty string, or 1 to `maxDocuments` of them) and `model`. The
 * texts' token counts are checked once tokenized (`checkTokenCounts`).
 *
 * @example
 * ```ts
 * parseClassifyRequest({ input: 'What a lovely day' }).wanted.texts; // ['What a lovely day']
 * ```
 */
export function parseClassifyRequest(body: unknown, limits: EncoderRequestLimits = {}): ClassifyRequest {
  const { maxDocuments, maxInputChars } = encoderLimits(limits);
  const fields = bodyFields(body);
  checkModelField(fields.model);
  const { input } = fields;
  if (typeof input === 'string') {
    return { wanted: { texts: [readText(input, 'input', maxInputChars)], fields: ['input'], listField: 'input' } };
  }
  if (!Array.isArray(input)) {
    throw invalidField('input', `\`input\` must be a non-empty string or an array of them, got ${describe(input)}`);
  }
  const texts = readList(input, 'input', maxDocuments, 'strings').map((text, index) =>
    readText(text, `input[${index}]`, maxInputChars),
  );
  return { wanted: { texts, fields: texts.map((_, index) => `input[${index}]`), listField: 'input' } };
}
