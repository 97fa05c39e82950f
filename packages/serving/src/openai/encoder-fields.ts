// What the encoder request parsers (rerank, score, classify) check alike: the body's shape, `model`, and texts,
// each bad one a 400 naming the field.
import { describeValue as describe } from '@microbatch/core';
import { invalidField, isAbsent } from './request-fields.js';

/**
 * Bounds of the rerank, score and classify requests beyond the model's own.
 *
 * @example
 * ```ts
 * parseRerankRequest(body, model, { maxDocuments: 100 });
 * ```
 */
export interface EncoderRequestLimits {
  /**
   * The most documents of one rerank request, `text_2` texts of one score request, or inputs of one classify
   * request (each is one batched item; a request's items are admitted all together or refused together).
   * @default 1000
   */
  readonly maxDocuments?: number;
  /**
   * The longest text, in characters (checked before tokenizing).
   * @default 20000
   */
  readonly maxInputChars?: number;
  /**
   * The most tokens of one request's texts or pairs together (a rerank query counts once per document): bounds the
   * model work one body can ask for, and the tokenizing, which stops at the first pair past it.
   * @default 65536
   */
  readonly maxRequestTokens?: number;
}

/**
 * What a checked encoder request asks to tokenize: `texts` (with `pairs`, each text with its pair), the field naming
 * each, and the list field the request's token bound names.
 *
 * @example
 * ```ts
 * const wanted: EncoderTexts = { texts: ['q', 'q'], pairs: ['a', 'b'], fields: ['documents[0]', 'documents[1]'], listField: 'documents' };
 * ```
 */
export interface EncoderTexts {
  readonly texts: readonly string[];
  readonly pairs?: readonly string[];
  readonly fields: readonly string[];
  readonly listField: string;
}

/** The limits with their defaults. */
export function encoderLimits(limits: EncoderRequestLimits): Required<EncoderRequestLimits> {
  return {
    maxDocuments: limits.maxDocuments ?? 1000,
    maxInputChars: limits.maxInputChars ?? 20_000,
    maxRequestTokens: limits.maxRequestTokens ?? 65_536,
  };
}

/** The body as a record, or a 400: it must be a JSON object. */
export function bodyFields(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalidField('body', `Expected the request body to be a JSON object, got ${describe(body)}`);
  }
  return body as Record<string, unknown>;
}

/** `model`: absent or a string (one model is served; its name is reported back). */
export function checkModelField(model: unknown): void {
  if (!isAbsent(model) && typeof model !== 'string') {
    throw invalidField('model', `\`model\` must be a string, got ${describe(model)}`);
  }
}

/** A non-empty string of at most `maxChars` characters at `field`. */
export function readText(value: unknown, field: string, maxChars: number): string {
  if (typeof value !== 'string') throw invalidField(field, `\`${field}\` must be a string, got ${describe(value)}`);
  if (value.length === 0) throw invalidField(field, `\`${field}\` must not be empty`);
  if (value.length > maxChars) {
    throw invalidField(field, `\`${field}\` must be at most ${maxChars} characters, got ${value.length}`);
  }
  return value;
}

/** A list field of 1 to `max` entries, or a 400 naming the bound. */
export function readList(value: unknown, field: string, max: number, of: string): unknown[] {
  if (!Array.isArray(value))
    throw invalidField(field, `\`${field}\` must be an array of ${of}, got ${describe(value)}`);
  if (value.length === 0) throw invalidField(field, `\`${field}\` must not be empty`);
  if (value.length > max) {
    throw invalidField(field, `\`${field}\` may hold at most ${max} entries, got ${value.length}`, { limit: max });
  }
  return value;
}

/**
 * Checks a request's token counts, as its tokenizer answered them in order (`stoppedAt`: the index of the first that
 * took the total past `maxRequestTokens`, where it stopped): a text or pair past the model's `maxTokens` is a 400
 * naming it, its count and the bound; a request past `maxRequestTokens` a 400 naming the list and the bound.
 *
 * @example
 * ```ts
 * checkTokenCounts([12, 600], undefined, wanted, 512, 65_536); // throws: `documents[1]` is 600 tokens ...
 * ```
 */
export function checkTokenCounts(
  counts: readonly number[],
  stoppedAt: number | undefined,
  wanted: EncoderTexts,
  maxTokens: number,
  maxRequestTokens: number,
): void {
  counts.forEach((count, index) => {
    if (count > maxTokens) {
      const field = wanted.fields[index] as string;
      throw invalidField(field, `\`${field}\` is ${count} tokens; this model reads at most ${maxTokens}`, {
        limit: maxTokens,
      });
    }
  });
  if (stoppedAt !== undefined) {
    const field = wanted.listField;
    throw invalidField(
      field,
      `\`${field}\` comes to more than ${maxRequestTokens} tokens in all (past it at \`${wanted.fields[stoppedAt] ?? field}\`); send fewer or shorter texts`,
      { limit: maxRequestTokens },
    );
  }
}
