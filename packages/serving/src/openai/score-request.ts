// vLLM's `POST /v1/score` body: `text_1` against one or many `text_2`, checked field by field (a bad one is a 400
// naming it) into the pairs to tokenize, one per score.
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
 * A checked score request: the `(text_1, text_2)` pairs to tokenize, one per score, in order.
 *
 * @example
 * ```ts
 * const { wanted } = parseScoreRequest({ text_1: 'a', text_2: ['b', 'c'] }); // 2 pairs
 * ```
 */
export interface ScoreRequest {
  readonly wanted: EncoderTexts;
}

/** One text, or a list of 1 to `max` texts, at `field`. */
function readTexts(value: unknown, field: string, max: number, maxChars: number): string[] {
  if (typeof value === 'string') return [readText(value, field, maxChars)];
  return readList(value, field, max, 'strings').map((text, index) => readText(text, `${field}[${index}]`, maxChars));
}

/**
 * Checks an untrusted score body as vLLM reads it: `text_1` and `text_2` each a string or a list of strings; one
 * `text_1` is scored against every `text_2`, two lists of the same length pair by position. At most `maxDocuments`
 * pairs; the pairs' token counts are checked once tokenized (`checkTokenCounts`).
 *
 * @example
 * ```ts
 * parseScoreRequest({ text_1: 'capital of France', text_2: ['Paris', 'Berlin'] }).wanted.texts.length; // 2
 * ```
 */
export function parseScoreRequest(body: unknown, limits: EncoderRequestLimits = {}): ScoreRequest {
  const { maxDocuments, maxInputChars } = encoderLimits(limits);
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
  return {
    wanted: {
      texts: second.map((_, index) => (first.length === 1 ? first[0] : first[index]) as string),
      pairs: second,
      fields: second.map((_, index) => (typeof fields.text_2 === 'string' ? 'text_2' : `text_2[${index}]`)),
      listField: 'text_2',
    },
  };
}
