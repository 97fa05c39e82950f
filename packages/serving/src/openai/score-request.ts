// vLLM's `POST /v1/score` body: `text_1` against one or many `text_2`, checked field by field (a bad one is a 400
// naming it) into one tokenized pair per score.
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
 * A checked score request: one tokenized `(text_1, text_2)` pair per score, in order.
 *
 * @example
 * ```ts
 * const { items } = parseScoreRequest({ text_1: 'a', text_2: ['b', 'c'] }, model); // 2 pairs
 * ```
 */
export interface ScoreRequest<Item> {
  readonly items: readonly Item[];
}

/** One text, or a list of 1 to `max` texts, at `field`. */
function readTexts(value: unknown, field: string, max: number, maxChars: number): string[] {
  if (typeof value === 'string') return [readText(value, field, maxChars)];
  return readList(value, field, max, 'strings').map((text, index) => readText(text, `${field}[${index}]`, maxChars));
}

/**
 * Checks an untrusted score body as vLLM reads it: `text_1` and `text_2` each a string or a list of strings; one
 * `text_1` is scored against every `text_2`, two lists of the same length pair by position. At most
 * `maxDocuments` pairs; each pair within the model's length (a 400 naming the field and the bound).
 *
 * @example
 * ```ts
 * parseScoreRequest({ text_1: 'capital of France', text_2: ['Paris', 'Berlin'] }, model).items.length; // 2
 * ```
 */
export function parseScoreRequest<Item>(
  body: unknown,
  model: EncoderModel<Item>,
  limits: EncoderRequestLimits = {},
): ScoreRequest<Item> {
  const { maxDocuments, maxInputChars, maxRequestTokens } = encoderLimits(limits);
  const fields = bodyFields(body);
  checkModelField(fields.model);
  const first = readTexts(fields.text_1, 'text_1', maxDocuments, maxInputChars);
  const second = readTexts(fields.text_2, 'text_2', maxDocuments, maxInputChars);
  if (first.length !== 1 && first.length !== second.length) {
    throw invalidField(
      'text_2',
      `\`text_1\` has ${first.length} texts and \`text_2\` ${second.length}: one \`text_1\` is scored against every \`text_2\`, or both lists have the same length`,
    );
  }
  const counted = tokenBudget(model, maxRequestTokens, 'text_2');
  const items = second.map((text, index) => {
    const field = typeof fields.text_2 === 'string' ? 'text_2' : `text_2[${index}]`;
    return counted(
      model.tokenizePair(first.length === 1 ? (first[0] as string) : (first[index] as string), text),
      field,
    );
  });
  return { items };
}
