// OpenAI's `POST /v1/completions` body: checked field by field (a bad one is a 400 naming it, OpenAI's `param`)
// into one generation input per prompt.
import { BatchError, describeValue as describe, isBatchError } from '@microbatch/core';
import type { TextGenerationInput } from '@microbatch/inference';
import { checkInteger, fail, isObjectLike } from '@microbatch/core/util';
import { invalidField as invalid, isAbsent, readCacheSalt, readIncludeUsage } from './request-fields.js';
import { readStructuredOutput, structuredOutputParam } from './response-format.js';
import { validateEach } from './validate-each.js';

/**
 * `max_tokens` of a request that gives none: OpenAI's own default for completions.
 *
 * @example
 * ```ts
 * parseCompletionRequest({ prompt: 'Hi ' }, validate).inputs[0].max_new_tokens; // 16
 * ```
 */
export const OPENAI_DEFAULT_MAX_TOKENS = 16;

/**
 * The lowest sampling temperature: a `temperature` above 0 and below it is served as 0 (greedy). Such temperatures
 * are greedy in effect, and very small ones (denormals such as `1e-45`) overflow the logits and sampled garbage.
 */
export const MIN_TEMPERATURE = 0.01;

/**
 * Bounds of {@link parseCompletionRequest} on top of the validator's own.
 *
 * @example
 * ```ts
 * parseCompletionRequest(body, validate, { maxPrompts: 4 });
 * ```
 */
export interface CompletionRequestLimits {
  /**
   * The most prompts one request may send as an array (each becomes one batched item).
   * @default 16
   */
  readonly maxPrompts?: number;
}

/**
 * Checks a {@link CompletionRequestLimits} (an operator's setting: a bad one is a `TypeError`, found when the endpoint
 * is made) and fills in its defaults.
 *
 * @example
 * ```ts
 * checkCompletionRequestLimits({ maxPrompts: 0 }); // TypeError: Expected `maxPrompts` to be an integer >= 1, got `0` (number)
 * ```
 */
export function checkCompletionRequestLimits(limits: CompletionRequestLimits): Required<CompletionRequestLimits> {
  if (!isObjectLike(limits)) fail('limits', 'an object', limits);
  return { maxPrompts: checkInteger('maxPrompts', limits.maxPrompts ?? 16, 1) };
}

/**
 * A checked `POST /v1/completions` request: one generation input per prompt.
 *
 * @example
 * ```ts
 * const { inputs, stream } = parseCompletionRequest(req.body, model.validate);
 * ```
 */
export interface CompletionRequest {
  /** One input per prompt, in order: choice `index` i answers `inputs[i]`. */
  readonly inputs: readonly TextGenerationInput[];
  /** Answer with Server-Sent Events chunks instead of one JSON object. */
  readonly stream: boolean;
  /** `stream_options.include_usage`: end the stream with a chunk carrying the token usage. */
  readonly includeUsage: boolean;
  /** OpenAI's `user`: who the request is for, as the client says (never a fairness key: shares go by client). */
  readonly user: string | undefined;
  /** vLLM's `cache_salt`: the request's own partition of the prefix cache, within its tenant's. */
  readonly cacheSalt: string | undefined;
  /** The body field the inputs' grammar came from (`response_format`, `structured_outputs`). */
  readonly grammarParam?: string | undefined;
}

/** The longest `user` accepted (a fairness key; longer ones would only grow the batcher's per-key state). */
const MAX_USER_LENGTH = 256;

/** Fields OpenAI defines that this server cannot honour, with the only value each may take. */
const UNSUPPORTED: ReadonlyArray<readonly [field: string, allowed: unknown, what: string]> = [
  ['n', 1, 'only `n: 1` is supported'],
  ['best_of', 1, 'only `best_of: 1` is supported'],
  ['echo', false, '`echo: true` is not supported'],
  ['logprobs', 0, '`logprobs` is not supported'],
  ['suffix', '', '`suffix` is not supported'],
  ['frequency_penalty', 0, '`frequency_penalty` is not supported (0 only)'],
  ['presence_penalty', 0, '`presence_penalty` is not supported (0 only)'],
  ['seed', undefined, '`seed` is not supported'],
];

/** The fields this server reads (`prompt` ... `user`) or checks against their only value ({@link UNSUPPORTED}). */
const KNOWN_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'prompt',
  'max_tokens',
  'temperature',
  'top_p',
  'stop',
  'stream',
  'stream_options',
  'user',
  'cache_salt',
  'n',
  'best_of',
  'echo',
  'logprobs',
  'suffix',
  'frequency_penalty',
  'presence_penalty',
  'logit_bias',
  'seed',
  'response_format',
  'structured_outputs',
]);

/**
 * Fields ignored because they cannot change the answer: OpenAI's bookkeeping (`metadata`, `store`, `service_tier`).
 * Any other field is refused (400 naming it): one a client expects to shape the answer (`max_new_tokens`, `top_k`,
 * `repetition_penalty`) must never be dropped in silence, and OpenAI itself refuses arguments it does not know.
 */
export const IGNORED_COMPLETION_FIELDS: readonly string[] = ['metadata', 'store', 'service_tier'];

/** What a client probably meant by a field of another API. */
// A Map, not an object literal: a client's field name (`__proto__`, `constructor`) must never reach a prototype.
const DID_YOU_MEAN: ReadonlyMap<string, string> = new Map([
  ['max_new_tokens', 'max_tokens'],
  ['max_completion_tokens', 'max_tokens'],
  ['max_length', 'max_tokens'],
  ['stop_sequences', 'stop'],
]);

/** Refuses a body with fields neither read, checked nor known to be harmless, naming them (at most 5). */
function checkUnknownFields(fields: Record<string, unknown>): void {
  const unknown = Object.keys(fields).filter(
    (field) => !KNOWN_FIELDS.has(field) && !IGNORED_COMPLETION_FIELDS.includes(field),
  );
  if (unknown.length === 0) return;
  const named = unknown
    .slice(0, 5)
    .map((field) => `\`${field.slice(0, 64)}\``)
    .join(', ');
  const more = unknown.length > 5 ? ` and ${unknown.length - 5} more` : '';
  const hint = unknown.map((field) => DID_YOU_MEAN.get(field)).find((known) => known !== undefined);
  throw invalid(
    unknown[0] as string,
    `Unknown field${unknown.length === 1 ? '' : 's'} ${named}${more}: this server does not read ` +
      `${unknown.length === 1 ? 'it' : 'them'}, and ${unknown.length === 1 ? 'it' : 'they'} could change the ` +
      `answer${hint === undefined ? '' : ` (did you mean \`${hint}\`?)`}`,
  );
}

function isEmptyObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;
}

/**
 * Checks an untrusted OpenAI `POST /v1/completions` body: `prompt` (a string or an array of strings), `model`,
 * `max_tokens` (default 16, as OpenAI's), `temperature`, `top_p`, `stop`, `stream`, `stream_options` and `user`. Each
 * prompt is checked by `validate` (a text-completion model's: length, tokens against the context). Every problem
 * throws `BatchError('INVALID_INPUT')` whose `details.field` names the field (and `details.index` the prompt), so
 * nothing invalid reaches the model. OpenAI fields this server cannot honour (`n`, `best_of`, `echo`, `logprobs`,
 * `suffix`, `frequency_penalty`, `presence_penalty`, `logit_bias`, `seed`) are accepted only at their neutral value;
 * {@link IGNORED_COMPLETION_FIELDS} are ignored; any other field (`max_new_tokens`, `top_k` ...) is refused, naming it.
 *
 * @example
 * ```ts
 * const request = parseCompletionRequest({ prompt: ['Once upon a time ', 'The cat '], max_tokens: 20 }, model.validate);
 * request.inputs.length; // 2
 * ```
 */
export function parseCompletionRequest(
  body: unknown,
  validate: (body: unknown) => TextGenerationInput,
  limits?: CompletionRequestLimits,
): CompletionRequest;
/** With a `validate` that may answer later (a model's `validateOffThread`): the request once every prompt is checked. */
export function parseCompletionRequest(
  body: unknown,
  validate: (body: unknown) => TextGenerationInput | PromiseLike<TextGenerationInput>,
  limits?: CompletionRequestLimits,
): CompletionRequest | Promise<CompletionRequest>;
export function parseCompletionRequest(
  body: unknown,
  validate: (body: unknown) => TextGenerationInput | PromiseLike<TextGenerationInput>,
  limits: CompletionRequestLimits = {},
): CompletionRequest | Promise<CompletionRequest> {
  const { maxPrompts } = checkCompletionRequestLimits(limits);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('body', `Expected the request body to be a JSON object, got ${describe(body)}`);
  }
  const fields = body as Record<string, unknown>;
  checkUnknownFields(fields);
  const {
    model,
    prompt,
    stream,
    stream_options: streamOptions,
    max_tokens: maxTokens,
    temperature,
    top_p,
    stop,
    user,
  } = fields;
  if (!isAbsent(model) && typeof model !== 'string') {
    throw invalid('model', `\`model\` must be a string, got ${describe(model)}`);
  }
  if (!isAbsent(stream) && typeof stream !== 'boolean') {
    throw invalid('stream', `\`stream\` must be a boolean, got ${describe(stream)}`);
  }
  if (!isAbsent(user) && (typeof user !== 'string' || user.length > MAX_USER_LENGTH)) {
    throw invalid('user', `\`user\` must be a string of at most ${MAX_USER_LENGTH} characters, got ${describe(user)}`);
  }
  const includeUsage = readIncludeUsage(streamOptions);
  for (const [field, allowed, what] of UNSUPPORTED) {
    const value = fields[field];
    if (!isAbsent(value) && value !== allowed) throw invalid(field, `${what}, got ${describe(value)}`);
  }
  const logitBias = fields.logit_bias;
  if (!isAbsent(logitBias) && !isEmptyObject(logitBias)) {
    throw invalid('logit_bias', `\`logit_bias\` is not supported (only {}), got ${describe(logitBias)}`);
  }
  const prompts = readPrompts(prompt, maxPrompts);
  // JSON has one number type: `max_tokens: 1.0` is the integer 1 and is accepted as such (documented in the README).
  const grammar = readStructuredOutput(fields);
  const common = {
    max_tokens: maxTokens ?? OPENAI_DEFAULT_MAX_TOKENS,
    temperature: flooredTemperature(temperature),
    top_p,
    stop,
    ...(grammar === undefined ? {} : { grammar }),
  };
  // After the prompts, as ever: a bad prompt is named before a bad `cache_salt`.
  const finish = (inputs: TextGenerationInput[]): CompletionRequest => ({
    inputs,
    stream: stream === true,
    includeUsage,
    user: typeof user === 'string' && user !== '' ? user : undefined,
    cacheSalt: readCacheSalt(fields.cache_salt),
    ...(grammar === undefined ? {} : { grammarParam: structuredOutputParam(fields) }),
  });
  const inputs = validateEach(
    prompts.length,
    (index) => validate({ ...common, prompt: prompts[index] }),
    (error, index) => (Array.isArray(prompt) ? withIndex(error, index) : error),
  );
  return Array.isArray(inputs) ? finish(inputs) : inputs.then(finish);
}

/** A temperature above 0 and below {@link MIN_TEMPERATURE} as 0 (greedy); anything else as given, for validation. */
function flooredTemperature(temperature: unknown): unknown {
  return typeof temperature === 'number' && temperature > 0 && temperature < MIN_TEMPERATURE ? 0 : temperature;
}

function readPrompts(prompt: unknown, maxPrompts: number): readonly string[] {
  if (typeof prompt === 'string') return [prompt];
  const shape = `\`prompt\` must be a string or an array of 1 to ${maxPrompts} strings`;
  if (!Array.isArray(prompt)) throw invalid('prompt', `${shape}, got ${describe(prompt)}`);
  if (prompt.length === 0 || prompt.length > maxPrompts) {
    throw invalid('prompt', `${shape}, got an array of ${prompt.length}`);
  }
  const index = prompt.findIndex((item) => typeof item !== 'string');
  // Token-id prompts (arrays of numbers) are OpenAI's too, but the tokenizer here is the server's business.
  if (index !== -1) throw invalid('prompt', `${shape}, got ${describe(prompt[index])} at index ${index}`, { index });
  return prompt as string[];
}

/** Says which prompt of an array failed: `prompt[2]` in the message, `index: 2` in the details. */
function withIndex(error: unknown, index: number): unknown {
  if (!isBatchError(error) || error.details?.field !== 'prompt') return error;
  return new BatchError(error.code, error.message.replaceAll('`prompt`', `\`prompt[${index}]\``), {
    cause: error,
    details: { ...error.details, index },
  });
}
