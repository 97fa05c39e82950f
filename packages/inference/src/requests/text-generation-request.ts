import { resolve } from 'node:path';
import { BatchError, ErrorCode } from '@microbatch/core';
import { checkInteger, checkString, definedEntries } from '@microbatch/core/util';
import { checkGenerationFields, contextLimitError } from './text-generation-fields.js';
import { checkGrammarSpec } from '../grammar/grammar-spec.js';
import { loadLocalTokenizer } from './local-tokenizer.js';
import type { TextGenerationInput } from '../contract/text-generation-types.js';

/**
 * Bounds on what one text-generation request may ask for.
 *
 * @example
 * ```ts
 * const parse = createTextGenerationParser({ maxTokens: 128, maxPromptChars: 2000 });
 * ```
 */
export interface TextGenerationLimits {
  /**
   * The longest `prompt`, in characters (checked before tokenizing, so huge bodies cost nothing).
   * @default 4000
   */
  readonly maxPromptChars?: number;
  /**
   * The largest `max_tokens` a request may ask for.
   * @default 256
   */
  readonly maxTokens?: number;
  /**
   * `max_tokens` of a request that gives none.
   * @default 64
   */
  readonly defaultMaxTokens?: number;
  /**
   * The model context in tokens: prompt tokens plus `max_tokens` must fit in it.
   * @default 512
   */
  readonly contextLength?: number;
  /**
   * The most stop strings per request.
   * @default 4
   */
  readonly maxStopStrings?: number;
  /**
   * The longest stop string, in characters.
   * @default 64
   */
  readonly maxStopChars?: number;
}

const LIMIT_DEFAULTS = {
  maxPromptChars: 4000,
  maxTokens: 256,
  defaultMaxTokens: 64,
  contextLength: 512,
  maxStopStrings: 4,
  maxStopChars: 64,
} as const satisfies Required<TextGenerationLimits>;

/**
 * Checks an untrusted request body and returns only its validated fields.
 *
 * @example
 * ```ts
 * const input = parse(req.body); // throws BatchError('INVALID_INPUT') naming the bad field
 * ```
 */
export type TextGenerationParser = (body: unknown) => TextGenerationInput;

/**
 * A parser that also checks the prompt's length in tokens against the context.
 *
 * @example
 * ```ts
 * validate.countTokens('Once upon a time, '); // 6
 * ```
 */
export interface TextGenerationValidator extends TextGenerationParser {
  /** The prompt's token count as the model sees it (BOS included). The validator calls it only when it must. */
  countTokens(prompt: string): number;
  /**
   * The longest prompt, in UTF-8 bytes, that could fit the context: `contextLength` x the tokenizer's longest token
   * in bytes. A longer prompt is refused before it is tokenized.
   */
  readonly maxPromptBytes: number;
  /**
   * The same checks, with the prompt's tokens counted by `count` (a tokenizer thread's, so that a long prompt never
   * holds the calling thread): synchronous where no count is needed (a prompt refused or accepted by its bytes alone),
   * else a promise that rejects with the same `BatchError('INVALID_INPUT')`.
   *
   * @example
   * ```ts
   * const input = await validate.withCount(body, async (prompt) => (await threads.encodeAll([prompt])).encodings[0].ids.length);
   * ```
   */
  withCount(
    body: unknown,
    count: (prompt: string) => PromiseLike<number>,
  ): TextGenerationInput | PromiseLike<TextGenerationInput>;
}

/**
 * Options of {@link createTextGenerationValidator}.
 *
 * @example
 * ```ts
 * await createTextGenerationValidator({ model: 'models/tinystories-656k', maxTokens: 128 });
 * ```
 */
export interface TextGenerationValidatorOptions extends TextGenerationLimits {
  /** The model folder whose `tokenizer.json` counts prompt tokens. */
  readonly model: string;
}

function invalid(field: string, message: string): BatchError {
  return new BatchError(ErrorCode.INVALID_INPUT, message, { details: { field } });
}

function resolveLimits(limits: TextGenerationLimits | undefined): Required<TextGenerationLimits> {
  const resolved = { ...LIMIT_DEFAULTS, ...definedEntries('limits', limits) } as Required<TextGenerationLimits>;
  checkInteger('maxPromptChars', resolved.maxPromptChars, 1);
  checkInteger('maxTokens', resolved.maxTokens, 1);
  checkInteger('defaultMaxTokens', resolved.defaultMaxTokens, 1, resolved.maxTokens);
  checkInteger('contextLength', resolved.contextLength, 2);
  checkInteger('maxStopStrings', resolved.maxStopStrings, 0);
  checkInteger('maxStopChars', resolved.maxStopChars, 1);
  return resolved;
}

/** The fields a text-generation body may carry; any other would be dropped, so it is refused (see `parse`). */
const BODY_FIELDS: ReadonlySet<string> = new Set([
  'prompt',
  'max_tokens',
  'temperature',
  'top_p',
  'stop',
  'seed',
  'logprobs',
  'grammar',
]);

/** The HTTP names of the runner-input fields a caller may mean (`max_new_tokens` is `max_tokens` here). */
const BODY_NAMES: ReadonlyMap<string, string> = new Map([['max_new_tokens', 'max_tokens']]);

function parse(body: unknown, limits: Required<TextGenerationLimits>): TextGenerationInput {
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
    // A field this parser does not read would change nothing: refused, naming it, never dropped in silence.
    const unknown = Object.keys(body).find((field) => !BODY_FIELDS.has(field));
    if (unknown !== undefined) {
      const hint = BODY_NAMES.get(unknown);
      throw invalid(
        unknown,
        `Unknown field \`${unknown.slice(0, 64)}\`: a text-generation body reads only ${[...BODY_FIELDS].join(', ')}` +
          (hint === undefined ? '' : ` (did you mean \`${hint}\`?)`),
      );
    }
  }
  const fields = checkGenerationFields(body, 'max_tokens', invalid, limits);
  const input: { -readonly [K in keyof TextGenerationInput]: TextGenerationInput[K] } = {
    prompt: fields.prompt,
    max_new_tokens: fields.maxTokens ?? limits.defaultMaxTokens,
  };
  if (fields.temperature !== undefined) input.temperature = fields.temperature;
  if (fields.topP !== undefined) input.top_p = fields.topP;
  if (fields.stop !== undefined) input.stop = fields.stop;
  if (fields.seed !== undefined) input.seed = fields.seed;
  if (fields.logprobs !== undefined) input.logprobs = fields.logprobs;
  const { grammar } = body as { grammar?: unknown };
  if (grammar !== undefined && grammar !== null) input.grammar = checkGrammarSpec(grammar, invalid);
  return input;
}

/**
 * Creates the parser of untrusted text-generation bodies (`prompt`, `max_tokens`, `temperature`, `top_p`, `stop`):
 * every bad field throws `BatchError('INVALID_INPUT')` naming it in `details.field`, and so does a field it does not
 * read (`max_new_tokens` is `max_tokens` here): nothing is dropped in silence.
 * It does not count tokens; {@link createTextGenerationValidator} does.
 *
 * @example
 * ```ts
 * const parse = createTextGenerationParser({ maxTokens: 128 });
 * const input = parse(req.body); // { prompt, max_new_tokens, temperature?, top_p?, stop? }
 * ```
 */
export function createTextGenerationParser(limits?: TextGenerationLimits): TextGenerationParser {
  const resolved = resolveLimits(limits);
  return (body) => parse(body, resolved);
}

/**
 * Loads the model's tokenizer on the main thread and returns a parser that also rejects prompts whose tokens plus
 * `max_tokens` exceed the context, before they are queued. Tokenizing costs the main thread about 2 ms per 1000
 * characters with the bundled model; the text-generation runner repeats the same check in its worker (where it
 * tokenizes anyway), so `createTextGenerationParser` alone is also safe. `withCount` makes the same checks with the
 * count from elsewhere (a tokenizer thread: `createTokenizerThreads`), so that no prompt is tokenized on the main
 * thread. The tokenizer is loaded from disk only.
 *
 * @example
 * ```ts
 * const validate = await createTextGenerationValidator({ model: 'models/tinystories-656k' });
 * app.post('/v1/completions', async (req, res) => res.json(await generate(validate(req.body))));
 * ```
 */
export async function createTextGenerationValidator(
  options: TextGenerationValidatorOptions,
): Promise<TextGenerationValidator> {
  const { model, ...limits } = definedEntries('options', options);
  const modelDir = resolve(checkString('model', model));
  const resolved = resolveLimits(limits);
  let tokenizer: Awaited<ReturnType<typeof loadLocalTokenizer>>;
  try {
    tokenizer = await loadLocalTokenizer(modelDir);
  } catch (error) {
    throw new Error(
      `Failed to load the tokenizer from "${modelDir}": ${error instanceof Error ? error.message : String(error)}`,
      {
        cause: error,
      },
    );
  }
  // What bounds the work an invalid prompt costs the main thread before it is refused: a prompt of more bytes than
  // the context holds in the longest tokens cannot fit and is refused unread; one whose every byte could be a token
  // (plus the tokens the tokenizer adds) and still fit needs no tokenizing here (the worker counts its tokens again
  // anyway). Only prompts between the two are tokenized: on this thread, or by `withCount`'s counter (a tokenizer
  // thread's, as the serving model does).
  let longestToken = 1;
  for (const token of vocabularyOf(tokenizer)) longestToken = Math.max(longestToken, Buffer.byteLength(token));
  const maxPromptBytes = resolved.contextLength * longestToken;
  const added = tokenizer.encode('').length + 1;
  // The one rule, whoever counts: refused by bytes, accepted by bytes, or else decided by the token count.
  const check = (body: unknown): Checked => {
    const input = parse(body, resolved);
    const maxNewTokens = input.max_new_tokens as number;
    const bytes = Buffer.byteLength(input.prompt);
    if (bytes > maxPromptBytes) {
      throw invalid(
        'prompt',
        `\`prompt\` cannot fit the context of ${resolved.contextLength} tokens: it is ${bytes} bytes, more than ${maxPromptBytes} (the context x the longest token)`,
      );
    }
    if (bytes + added + maxNewTokens <= resolved.contextLength) return { input };
    return {
      input,
      byTokens: (tokens) => {
        const overflow = contextLimitError(tokens, maxNewTokens, resolved.contextLength, 'max_tokens');
        if (overflow !== undefined) throw invalid(overflow.field, overflow.message);
        return input;
      },
    };
  };
  const validator: TextGenerationValidator = Object.assign(
    (body: unknown): TextGenerationInput => {
      const { input, byTokens } = check(body);
      return byTokens === undefined ? input : byTokens(validator.countTokens(input.prompt));
    },
    {
      countTokens: (prompt: string) => tokenizer.encode(prompt).length,
      maxPromptBytes,
      withCount: (body: unknown, count: (prompt: string) => PromiseLike<number>) => {
        const { input, byTokens } = check(body);
        return byTokens === undefined ? input : Promise.resolve(count(input.prompt)).then(byTokens);
      },
    },
  );
  return validator;
}

/** A body that passed every check but the token count; `byTokens`, when present, decides it from the prompt's count. */
interface Checked {
  readonly input: TextGenerationInput;
  readonly byTokens?: (tokens: number) => TextGenerationInput;
}

/** The token strings of a transformers.js tokenizer (`get_vocab()`: a map or an object from token to id). */
function vocabularyOf(tokenizer: unknown): string[] {
  const { get_vocab: getVocab } = tokenizer as { get_vocab?: () => unknown };
  const vocab = typeof getVocab === 'function' ? getVocab.call(tokenizer) : undefined;
  if (Array.isArray(vocab)) return vocab.filter((token): token is string => typeof token === 'string');
  if (vocab instanceof Map) return [...vocab.keys()].filter((token): token is string => typeof token === 'string');
  if (typeof vocab === 'object' && vocab !== null) return Object.keys(vocab);
  throw new Error('The tokenizer has no vocabulary to bound its longest token');
}
