// The field checks of a text-generation request, in one place: the HTTP-side parser and the worker-side runner
// check with these, so a field is valid or invalid, with the same message, wherever it is checked.
import { describeValue } from '@microbatch/core/util';

/** The most alternatives a token's log-probabilities list (OpenAI's `top_logprobs` bound). */
export const MAX_TOP_LOGPROBS = 20;

/** The checked fields; `undefined` where the request leaves the default. */
export interface GenerationFields {
  readonly prompt: string;
  readonly maxTokens: number | undefined;
  readonly temperature: number | undefined;
  readonly topP: number | undefined;
  readonly stop: readonly string[] | undefined;
  readonly seed: number | undefined;
  readonly logprobs: number | undefined;
}

/** Bounds the HTTP parser adds; the runner checks only what the model needs. */
export interface FieldBounds {
  readonly maxPromptChars?: number;
  readonly maxTokens?: number;
  readonly maxStopStrings?: number;
  readonly maxStopChars?: number;
}

/**
 * Checks `prompt`, the token limit (named `tokensField`: `max_tokens` in HTTP bodies, `max_new_tokens` in runner
 * inputs), `temperature`, `top_p` and `stop`. `invalid` builds the error thrown for a bad field; `subject` names
 * the whole value in the message for a non-object.
 */
export function checkGenerationFields(
  body: unknown,
  tokensField: 'max_tokens' | 'max_new_tokens',
  invalid: (field: string, message: string) => Error,
  bounds: FieldBounds = {},
  subject = 'the request body',
): GenerationFields {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('body', `Expected ${subject} to be a JSON object, got ${describeValue(body)}`);
  }
  const record = body as Record<string, unknown>;
  const { prompt, temperature, top_p, stop } = record;
  const tokens = record[tokensField];
  if (typeof prompt !== 'string' || prompt.trim().length === 0) {
    throw invalid('prompt', `\`prompt\` must be a non-empty string, got ${describeValue(prompt)}`);
  }
  const maxChars = bounds.maxPromptChars ?? Number.POSITIVE_INFINITY;
  if (prompt.length > maxChars) {
    throw invalid('prompt', `\`prompt\` must be at most ${maxChars} characters, got ${prompt.length}`);
  }
  const mostTokens = bounds.maxTokens ?? Number.MAX_SAFE_INTEGER;
  if (
    tokens !== undefined &&
    tokens !== null &&
    (typeof tokens !== 'number' || !Number.isInteger(tokens) || tokens < 1 || tokens > mostTokens)
  ) {
    const range = mostTokens === Number.MAX_SAFE_INTEGER ? 'an integer >= 1' : `an integer from 1 to ${mostTokens}`;
    throw invalid(tokensField, `\`${tokensField}\` must be ${range}, got ${describeValue(tokens)}`);
  }
  if (
    temperature !== undefined &&
    temperature !== null &&
    (typeof temperature !== 'number' || !Number.isFinite(temperature) || temperature < 0 || temperature > 2)
  ) {
    throw invalid('temperature', `\`temperature\` must be a number from 0 to 2, got ${describeValue(temperature)}`);
  }
  if (
    top_p !== undefined &&
    top_p !== null &&
    (typeof top_p !== 'number' || !Number.isFinite(top_p) || top_p <= 0 || top_p > 1)
  ) {
    throw invalid('top_p', `\`top_p\` must be a number greater than 0 and at most 1, got ${describeValue(top_p)}`);
  }
  let stops: readonly string[] | undefined;
  if (stop !== undefined && stop !== null) {
    const list = typeof stop === 'string' ? [stop] : stop;
    const most = bounds.maxStopStrings ?? Number.POSITIVE_INFINITY;
    const longest = bounds.maxStopChars ?? Number.POSITIVE_INFINITY;
    if (
      !Array.isArray(list) ||
      list.length > most ||
      list.some((s) => typeof s !== 'string' || s.length === 0 || s.length > longest)
    ) {
      const count = most === Number.POSITIVE_INFINITY ? 'an array of' : `an array of at most ${most}`;
      const size = longest === Number.POSITIVE_INFINITY ? 'non-empty strings' : `strings of 1 to ${longest} characters`;
      throw invalid('stop', `\`stop\` must be a string or ${count} ${size}, got ${describeValue(stop)}`);
    }
    stops = list.length > 0 ? [...(list as string[])] : undefined;
  }
  const { seed, logprobs } = record;
  if (seed !== undefined && seed !== null && !Number.isSafeInteger(seed)) {
    throw invalid('seed', `\`seed\` must be an integer, got ${describeValue(seed)}`);
  }
  if (
    logprobs !== undefined &&
    logprobs !== null &&
    (!Number.isInteger(logprobs) || (logprobs as number) < 0 || (logprobs as number) > MAX_TOP_LOGPROBS)
  ) {
    throw invalid(
      'logprobs',
      `\`logprobs\` must be an integer from 0 to ${MAX_TOP_LOGPROBS} (alternatives per token), got ${describeValue(logprobs)}`,
    );
  }
  return {
    seed: seed === undefined || seed === null ? undefined : (seed as number),
    logprobs: logprobs === undefined || logprobs === null ? undefined : (logprobs as number),
    prompt,
    maxTokens: tokens === undefined || tokens === null ? undefined : tokens,
    temperature: temperature === undefined || temperature === null ? undefined : temperature,
    topP: top_p === undefined || top_p === null ? undefined : top_p,
    stop: stops,
  };
}

/** The error for a prompt whose tokens plus the token limit exceed the context, or `undefined` when it fits. */
export function contextLimitError(
  promptTokens: number,
  maxTokens: number,
  contextLength: number,
  tokensField: 'max_tokens' | 'max_new_tokens',
): { readonly field: string; readonly message: string } | undefined {
  if (promptTokens + maxTokens <= contextLength) return undefined;
  return {
    field: promptTokens >= contextLength ? 'prompt' : tokensField,
    message: `\`prompt\` is ${promptTokens} tokens; with \`${tokensField}\` ${maxTokens} it exceeds the model context of ${contextLength} tokens`,
  };
}
