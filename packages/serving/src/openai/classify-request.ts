// vLLM's `POST /classify` body: `input` a text or a list of texts, checked (a bad one is a 400 naming it) into one
// tokenized text per input.
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
import { invalidField } from './request-fields.js';

/**
 * A checked classify request: one tokenized text per input, in order.
 *
 * @example
 * ```ts
 * const { items } = parseClassifyRequest({ input: ['great', 'awful'] }, model); // 2 texts
 * ```
 */
export interface ClassifyRequest<Item> {
  readonly items: readonly Item[];
}

/**
 * Checks an untrusted classify body: `input` (a non-empty string, or 1 to `maxDocuments` of them) and `model`.
 * Texts are tokenized here: one past the model's length is a 400 naming it and the bound.
 *
 * @example
 * ```ts
 * parseClassifyRequest({ input: 'What a lovely day' }, model).items.length; // 1
 * ```
 */
export function parseClassifyRequest<Item>(
  body: unknown,
  model: EncoderModel<Item>,
  limits: EncoderRequestLimits = {},
): ClassifyRequest<Item> {
  const { maxDocuments, maxInputChars, maxRequestTokens } = encoderLimits(limits);
  const fields = bodyFields(body);
  checkModelField(fields.model);
  const { input } = fields;
  const counted = tokenBudget(model, maxRequestTokens, 'input');
  if (typeof input === 'string') {
    return { items: [counted(model.tokenize(readText(input, 'input', maxInputChars)), 'input')] };
  }
  if (!Array.isArray(input)) {
    throw invalidField('input', `\`input\` must be a non-empty string or an array of them, got ${describe(input)}`);
  }
  const texts = readList(input, 'input', maxDocuments, 'strings');
  return {
    items: texts.map((text, index) =>
      counted(model.tokenize(readText(text, `input[${index}]`, maxInputChars)), `input[${index}]`),
    ),
  };
}
