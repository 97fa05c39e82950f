// The worker-side check of one text-generation input, shared by both schedulings. Inputs may come straight from a
// caller of `pool.run()`, so the runner checks every field itself; the HTTP-side parser
// (`text-generation-request.ts`) uses the same field checks, so both reject the same inputs with the same messages.
import { InputError } from '../contract/errors.js';
import type { TextGenerationRunnerSpec } from '../contract/runner-specs.js';
import type { GrammarSpec } from '../contract/text-generation-types.js';
import { checkGrammarSpec } from '../grammar/grammar-spec.js';
import { checkGenerationFields, contextLimitError } from '../requests/text-generation-fields.js';

/** One checked request with the runner's defaults applied. */
export interface GenerationRequest {
  /** The prompt's token ids (BOS included), tokenized once for both the context check and the model. */
  readonly ids: readonly number[];
  readonly maxNewTokens: number;
  readonly temperature: number;
  readonly topP: number;
  readonly stop: readonly string[];
  /** The request's own seed, if it gave one. */
  readonly seed: number | undefined;
  /** How many alternatives to report per token, if it asked for log-probabilities. */
  readonly logprobs: number | undefined;
  /** Generated ids already sent (`resume_tokens`): generation continues after them; absent for a fresh request. */
  readonly resume: readonly number[] | undefined;
  /** The grammar the generation must follow (structured outputs), if it gave one. */
  readonly grammar: GrammarSpec | undefined;
  /** The prefix cache's partition (`cache_salt`, `''` when absent). */
  readonly cacheSalt: string;
}

/** The longest `cache_salt` accepted (it is hashed into every block key of its prompt). */
const MAX_CACHE_SALT = 1024;

/** Checks one input against the spec's defaults and the model's context; throws `InputError` naming the field. */
export function checkGenerationInput(
  input: unknown,
  spec: Required<TextGenerationRunnerSpec>,
  encode: (text: string) => readonly number[],
  contextLength: number,
): GenerationRequest {
  const fields = checkGenerationFields(
    input,
    'max_new_tokens',
    (field, message) => new InputError(field, message),
    {},
    'a text-generation input',
  );
  const maxNewTokens = fields.maxTokens ?? spec.maxNewTokens;
  const ids = encode(fields.prompt);
  const overflow = contextLimitError(ids.length, maxNewTokens, contextLength, 'max_new_tokens');
  if (overflow !== undefined) throw new InputError(overflow.field, overflow.message);
  const resume = checkResume((input as { resume_tokens?: unknown }).resume_tokens, maxNewTokens);
  if (resume !== undefined && fields.logprobs !== undefined) {
    throw new InputError('resume_tokens', '`resume_tokens` cannot be combined with `logprobs`');
  }
  const { grammar } = input as { grammar?: unknown };
  return {
    grammar:
      grammar === undefined || grammar === null
        ? undefined
        : checkGrammarSpec(grammar, (field, message) => new InputError(field, message)),
    ids,
    maxNewTokens,
    temperature: fields.temperature ?? spec.temperature,
    topP: fields.topP ?? spec.topP,
    stop: [...spec.stop, ...(fields.stop ?? [])],
    seed: fields.seed,
    logprobs: fields.logprobs,
    resume,
    cacheSalt: checkCacheSalt((input as { cache_salt?: unknown }).cache_salt),
  };
}

/** `cache_salt`: a string of at most {@link MAX_CACHE_SALT} characters, `''` when absent. */
function checkCacheSalt(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string' || value.length > MAX_CACHE_SALT) {
    throw new InputError('cache_salt', `\`cache_salt\` must be a string of at most ${MAX_CACHE_SALT} characters`);
  }
  return value;
}

/**
 * `resume_tokens`: token ids (integers >= 0), at most `max_new_tokens` (as many: the stream's final chunk went out
 * and only its answer was lost, so the resumed row ends at once).
 */
function checkResume(value: unknown, maxNewTokens: number): readonly number[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (
    !Array.isArray(value) ||
    value.length > maxNewTokens ||
    value.some((id) => typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0)
  ) {
    throw new InputError(
      'resume_tokens',
      `\`resume_tokens\` must be an array of at most ${maxNewTokens} (\`max_new_tokens\`) token ids, got ${describe(value)}`,
    );
  }
  return [...(value as number[])];
}

function describe(value: unknown): string {
  return Array.isArray(value) ? `an array of ${value.length}` : typeof value;
}
