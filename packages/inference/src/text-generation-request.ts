import { basename, dirname, resolve, sep } from 'node:path';
import { BatchError, ErrorCode } from '@microbatch/core';
import { checkInteger, checkString, definedEntries, describe } from './options.js';
import type { TextGenerationInput } from './runner-types.js';

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
  /** The prompt's token count as the model sees it (BOS included). */
  countTokens(prompt: string): number;
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

function parse(body: unknown, limits: Required<TextGenerationLimits>): TextGenerationInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('body', `Expected the request body to be a JSON object, got ${describe(body)}`);
  }
  const { prompt, max_tokens, temperature, top_p, stop } = body as Record<string, unknown>;
  if (typeof prompt !== 'string' || prompt.trim().length === 0) {
    throw invalid('prompt', `\`prompt\` must be a non-empty string, got ${describe(prompt)}`);
  }
  if (prompt.length > limits.maxPromptChars) {
    throw invalid('prompt', `\`prompt\` must be at most ${limits.maxPromptChars} characters, got ${prompt.length}`);
  }
  const maxTokens = max_tokens ?? limits.defaultMaxTokens;
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > limits.maxTokens) {
    throw invalid('max_tokens', `\`max_tokens\` must be an integer from 1 to ${limits.maxTokens}, got ${describe(max_tokens)}`);
  }
  const input: { -readonly [K in keyof TextGenerationInput]: TextGenerationInput[K] } = { prompt, max_new_tokens: maxTokens };
  if (temperature !== undefined && temperature !== null) {
    if (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0 || temperature > 2) {
      throw invalid('temperature', `\`temperature\` must be a number from 0 to 2, got ${describe(temperature)}`);
    }
    input.temperature = temperature;
  }
  if (top_p !== undefined && top_p !== null) {
    if (typeof top_p !== 'number' || !Number.isFinite(top_p) || top_p <= 0 || top_p > 1) {
      throw invalid('top_p', `\`top_p\` must be a number greater than 0 and at most 1, got ${describe(top_p)}`);
    }
    input.top_p = top_p;
  }
  if (stop !== undefined && stop !== null) {
    const stops = typeof stop === 'string' ? [stop] : stop;
    const { maxStopStrings: most, maxStopChars: longest } = limits;
    if (
      !Array.isArray(stops) ||
      stops.length > most ||
      stops.some((s) => typeof s !== 'string' || s.length === 0 || s.length > longest)
    ) {
      throw invalid('stop', `\`stop\` must be a string or an array of at most ${most} strings of 1 to ${longest} characters, got ${describe(stop)}`);
    }
    if (stops.length > 0) input.stop = [...(stops as string[])];
  }
  return input;
}

/**
 * Creates the parser of untrusted text-generation bodies (`prompt`, `max_tokens`, `temperature`, `top_p`, `stop`):
 * every bad field throws `BatchError('INVALID_INPUT')` naming it in `details.field`, and unknown fields are dropped.
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
 * tokenizes anyway), so `createTextGenerationParser` alone is also safe. The tokenizer is loaded from disk only.
 *
 * @example
 * ```ts
 * const validate = await createTextGenerationValidator({ model: 'models/tinystories-656k' });
 * app.post('/v1/completions', async (req, res) => res.json(await generate(validate(req.body))));
 * ```
 */
export async function createTextGenerationValidator(options: TextGenerationValidatorOptions): Promise<TextGenerationValidator> {
  const { model, ...limits } = definedEntries('options', options);
  const modelDir = resolve(checkString('model', model));
  const resolved = resolveLimits(limits);
  // Imported here, not at the top: loading transformers.js pulls in onnxruntime, which pool-only users never need
  // on the main thread.
  const { AutoTokenizer, env } = await import('@huggingface/transformers');
  env.allowRemoteModels = false;
  env.localModelPath = dirname(modelDir) + sep;
  let tokenizer: Awaited<ReturnType<typeof AutoTokenizer.from_pretrained>>;
  try {
    tokenizer = await AutoTokenizer.from_pretrained(basename(modelDir));
  } catch (error) {
    throw new Error(`Failed to load the tokenizer from "${modelDir}": ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  const countTokens = (prompt: string) => tokenizer.encode(prompt).length;
  const validate = (body: unknown): TextGenerationInput => {
    const input = parse(body, resolved);
    const promptTokens = countTokens(input.prompt);
    const maxTokens = input.max_new_tokens as number;
    if (promptTokens + maxTokens > resolved.contextLength) {
      throw invalid(
        promptTokens >= resolved.contextLength ? 'prompt' : 'max_tokens',
        `\`prompt\` is ${promptTokens} tokens; with \`max_tokens\` ${maxTokens} it exceeds the model context of ${resolved.contextLength} tokens`,
      );
    }
    return input;
  };
  return Object.assign(validate, { countTokens });
}
