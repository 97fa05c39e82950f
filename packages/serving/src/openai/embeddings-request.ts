// OpenAI's `POST /v1/embeddings` body: checked field by field (a bad one is a 400 naming it, OpenAI's `param`)
// into each input: a text to tokenize (on the model's tokenizer thread) or token ids.
import { BatchError, ErrorCode, describeValue as describe } from '@microbatch/core';

/**
 * Bounds of {@link parseEmbeddingsRequest}.
 *
 * @example
 * ```ts
 * parseEmbeddingsRequest(body, model, { maxInputs: 64 });
 * ```
 */
export interface EmbeddingsRequestLimits {
  /**
   * The most inputs one request may send (each is one batched item).
   * @default 256
   */
  readonly maxInputs?: number;
  /**
   * The longest input text, in characters (checked before tokenizing).
   * @default 20000
   */
  readonly maxInputChars?: number;
}

/**
 * A checked `POST /v1/embeddings` request: every input in order, a text still to tokenize or checked token ids, and
 * the field naming each (`input`, `input[2]`).
 *
 * @example
 * ```ts
 * const { inputs, encoding, dimensions } = parseEmbeddingsRequest(req.body, model);
 * ```
 */
export interface EmbeddingsRequest {
  readonly inputs: readonly (string | readonly number[])[];
  readonly fields: readonly string[];
  readonly encoding: 'float' | 'base64';
  /** How many leading dimensions each embedding keeps. */
  readonly dimensions: number;
  /** OpenAI's `user`: checked and kept, never the fairness key (a client chooses it). */
  readonly user: string | undefined;
}

/** What the parser reads of an embedding model (an `EmbeddingService`'s fields of the same names). */
interface Model {
  /** Size of the model's embeddings. */
  readonly dimensions: number;
  /** The most tokens one input may have. */
  readonly maxTokens: number;
  /** Token ids are from 0 to `vocabSize - 1`. */
  readonly vocabSize: number;
  /** Whether `dimensions` below the model's may be asked for. */
  readonly truncatableDimensions: boolean;
}

function invalid(field: string, message: string): BatchError {
  return new BatchError(ErrorCode.INVALID_INPUT, message, { details: { field } });
}

function isAbsent(value: unknown): boolean {
  return value === undefined || value === null;
}

const isTokenArray = (value: unknown): value is unknown[] =>
  Array.isArray(value) && value.length > 0 && value.every((item) => typeof item === 'number');

/**
 * Checks an untrusted OpenAI `POST /v1/embeddings` body: `input` (a string, an array of strings, an array of token
 * ids, or an array of such arrays), `model`, `encoding_format` (`float` | `base64`), `dimensions` and `user`.
 * Token ids are checked here; texts once tokenized (`checkEmbeddingTokens`), so an input longer than the model reads
 * is a 400 with its token count before anything is queued. Every problem throws `BatchError('INVALID_INPUT')`
 * naming the field (`input[2]`, `dimensions` ...).
 *
 * @example
 * ```ts
 * parseEmbeddingsRequest({ input: ['a', 'b'], encoding_format: 'base64' }, model).inputs.length; // 2
 * ```
 */
export function parseEmbeddingsRequest(
  body: unknown,
  model: Model,
  limits: EmbeddingsRequestLimits = {},
): EmbeddingsRequest {
  const maxInputs = limits.maxInputs ?? 256;
  const maxChars = limits.maxInputChars ?? 20_000;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('body', `Expected the request body to be a JSON object, got ${describe(body)}`);
  }
  const { input, model: name, encoding_format: format, dimensions, user } = body as Record<string, unknown>;
  if (!isAbsent(name) && typeof name !== 'string')
    throw invalid('model', `\`model\` must be a string, got ${describe(name)}`);
  if (!isAbsent(user) && (typeof user !== 'string' || user.length > 256)) {
    throw invalid('user', `\`user\` must be a string of at most 256 characters, got ${describe(user)}`);
  }
  if (!isAbsent(format) && format !== 'float' && format !== 'base64') {
    throw invalid('encoding_format', `\`encoding_format\` must be "float" or "base64", got ${describe(format)}`);
  }
  let kept = model.dimensions;
  if (!isAbsent(dimensions)) {
    if (!Number.isInteger(dimensions) || (dimensions as number) < 1 || (dimensions as number) > model.dimensions) {
      throw invalid(
        'dimensions',
        `\`dimensions\` must be an integer from 1 to ${model.dimensions}, got ${describe(dimensions)}`,
      );
    }
    if (dimensions !== model.dimensions && !model.truncatableDimensions) {
      throw invalid(
        'dimensions',
        `This model's embeddings have ${model.dimensions} dimensions and cannot be shortened; \`dimensions\` must be ${model.dimensions} or absent`,
      );
    }
    kept = dimensions as number;
  }
  const shape = `\`input\` must be a non-empty string, an array of 1 to ${maxInputs} non-empty strings, an array of token ids, or an array of such arrays`;
  let items: unknown[];
  if (typeof input === 'string' || isTokenArray(input)) items = [input];
  else if (Array.isArray(input) && input.length > 0 && input.length <= maxInputs) items = input;
  else
    throw invalid('input', `${shape}, got ${Array.isArray(input) ? `an array of ${input.length}` : describe(input)}`);
  const one = items.length === 1 && (typeof input === 'string' || isTokenArray(input));
  const fields = items.map((_, index) => (one ? 'input' : `input[${index}]`));
  const inputs = items.map((item, index) => readInput(item, fields[index] as string, model, maxChars, shape));
  return {
    inputs,
    fields,
    encoding: format === 'base64' ? 'base64' : 'float',
    dimensions: kept,
    user: typeof user === 'string' && user !== '' ? user : undefined,
  };
}

function readInput(item: unknown, at: string, model: Model, maxChars: number, shape: string): string | number[] {
  if (typeof item === 'string') {
    if (item.length === 0) throw invalid(at, `\`${at}\` must not be empty`);
    if (item.length > maxChars)
      throw invalid(at, `\`${at}\` must be at most ${maxChars} characters, got ${item.length}`);
    return item;
  }
  if (!isTokenArray(item)) throw invalid(at, `${shape}, got ${describe(item)} at \`${at}\``);
  const bad = item.findIndex((id) => !Number.isInteger(id) || (id as number) < 0 || (id as number) >= model.vocabSize);
  if (bad !== -1) {
    throw invalid(
      at,
      `\`${at}\` token ids must be integers from 0 to ${model.vocabSize - 1}, got ${describe(item[bad])} at ${bad}`,
    );
  }
  return checkEmbeddingTokens(item as number[], at, model.maxTokens);
}

/**
 * An input's token ids within the model's bound, or a 400 naming its field and its token count.
 *
 * @example
 * ```ts
 * checkEmbeddingTokens(ids, 'input[2]', 512);
 * ```
 */
export function checkEmbeddingTokens(ids: number[], at: string, maxTokens: number): number[] {
  if (ids.length > maxTokens) {
    throw invalid(at, `\`${at}\` is ${ids.length} tokens; this model reads at most ${maxTokens}`);
  }
  return ids;
}
