// OpenAI's `POST /v1/chat/completions` body: checked field by field (a bad one is a 400 naming it, OpenAI's
// `param`), its messages rendered by the model's chat template into one generation input per choice.
import { BatchError, describeValue as describe, isBatchError } from '@microbatch/core';
import type { TextGenerationInput } from '@microbatch/inference';
import { checkInteger, fail, isObjectLike } from '@microbatch/core/util';
import { type ChatMessage, type ChatMessageToolCall, type ChatTemplate, PLAIN_CHAT_TEMPLATE } from './chat-template.js';
import { readStructuredOutput, structuredOutputParam } from './response-format.js';
import { type ToolRequest, readTools, toolGrammar } from './tool-calls.js';
import { MIN_TEMPERATURE } from './completion-request.js';
import { invalidField as invalid, isAbsent, readCacheSalt, readIncludeUsage } from './request-fields.js';
import { validateEach } from './validate-each.js';

/**
 * Bounds of {@link parseChatRequest} on top of the model's own.
 *
 * @example
 * ```ts
 * parseChatRequest(body, validate, template, { maxChoices: 4 });
 * ```
 */
export interface ChatRequestLimits {
  /**
   * The largest `n` (choices per request; each is one batched item).
   * @default 8
   */
  readonly maxChoices?: number;
  /**
   * The most messages one request may send.
   * @default 256
   */
  readonly maxMessages?: number;
}

/**
 * A checked `POST /v1/chat/completions` request: the rendered prompt, one generation input per choice.
 *
 * @example
 * ```ts
 * const { inputs, stream, logprobs } = parseChatRequest(req.body, model.validate, template);
 * ```
 */
export interface ChatRequest {
  /** The conversation as the model reads it (the chat template's output). */
  readonly prompt: string;
  /** One input per choice (`n`), in order: choice `index` i answers `inputs[i]`. */
  readonly inputs: readonly TextGenerationInput[];
  readonly stream: boolean;
  /** `stream_options.include_usage`: end the stream with a chunk carrying the token usage. */
  readonly includeUsage: boolean;
  /** OpenAI's `user`: who the request is for, as the client says (never a fairness key: shares go by client). */
  readonly user: string | undefined;
  /** vLLM's `cache_salt`: the request's own partition of the prefix cache, within its tenant's. */
  readonly cacheSalt: string | undefined;
  /** Whether choices carry `logprobs`. */
  readonly logprobs: boolean;
  /** The declared tools, `tool_choice` and `parallel_tool_calls`; `undefined` without tools. */
  readonly tools?: ToolRequest | undefined;
  /** The body field the inputs' grammar came from (`response_format`, `structured_outputs`, `tool_choice`). */
  readonly grammarParam?: string | undefined;
}

const MAX_USER_LENGTH = 256;
const ROLES: ReadonlySet<string> = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

/**
 * Fields that would change the answer's meaning and are not supported: refused (400 naming the field) unless absent
 * or set to the value that means "not used". Other unknown fields are ignored, as OpenAI does.
 */
const UNSUPPORTED: ReadonlyArray<readonly [field: string, unused: (value: unknown) => boolean, what: string]> = [
  ['functions', (value) => Array.isArray(value) && value.length === 0, 'functions are not supported'],
  ['function_call', (value) => value === 'none', 'function_call is not supported'],
  ['audio', () => false, 'audio output is not supported'],
  [
    'modalities',
    (value) => Array.isArray(value) && value.length === 1 && value[0] === 'text',
    'only the `text` modality is supported',
  ],
  ['prediction', () => false, 'predicted outputs are not supported'],
  ['web_search_options', () => false, 'web search is not supported'],
  [
    'logit_bias',
    (value) => typeof value === 'object' && Object.keys(value ?? {}).length === 0,
    'logit_bias is not supported',
  ],
  ['presence_penalty', (value) => value === 0, 'presence_penalty is not supported (only 0)'],
  ['frequency_penalty', (value) => value === 0, 'frequency_penalty is not supported (only 0)'],
];

/** `describeValue` for scalars and arrays; an object is only named (its fields are the client's own). */
function got(value: unknown): string {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? 'an object' : describe(value);
}

/**
 * Checks a {@link ChatRequestLimits} (an operator's setting: a bad one is a `TypeError`, found when the endpoint is
 * made) and fills in its defaults.
 *
 * @example
 * ```ts
 * checkChatRequestLimits({ maxChoices: 0 }); // TypeError: Expected `maxChoices` to be an integer >= 1, got `0` (number)
 * ```
 */
export function checkChatRequestLimits(limits: ChatRequestLimits): Required<ChatRequestLimits> {
  if (!isObjectLike(limits)) fail('limits', 'an object', limits);
  return {
    maxChoices: checkInteger('maxChoices', limits.maxChoices ?? 8, 1),
    maxMessages: checkInteger('maxMessages', limits.maxMessages ?? 256, 1),
  };
}

/**
 * Checks an untrusted OpenAI `POST /v1/chat/completions` body and renders its `messages` with `template`. The
 * rendered prompt and the sampling fields go through `validate` (the model's: length, tokens against the context),
 * once per choice, so nothing invalid reaches the model. Every problem throws `BatchError('INVALID_INPUT')` whose
 * `details.field` names the field (`messages[1].content`, `stop`, `tools` ...).
 *
 * @example
 * ```ts
 * const request = parseChatRequest({ messages: [{ role: 'user', content: 'Hi' }], n: 2 }, model.validate);
 * request.inputs.length; // 2
 * ```
 */
export function parseChatRequest(
  body: unknown,
  validate: (body: unknown) => TextGenerationInput,
  template?: ChatTemplate,
  limits?: ChatRequestLimits,
): ChatRequest;
/** With a `validate` that may answer later (a model's `validateOffThread`): the request once every choice is checked. */
export function parseChatRequest(
  body: unknown,
  validate: (body: unknown) => TextGenerationInput | PromiseLike<TextGenerationInput>,
  template?: ChatTemplate,
  limits?: ChatRequestLimits,
): ChatRequest | Promise<ChatRequest>;
export function parseChatRequest(
  body: unknown,
  validate: (body: unknown) => TextGenerationInput | PromiseLike<TextGenerationInput>,
  template: ChatTemplate = PLAIN_CHAT_TEMPLATE,
  limits: ChatRequestLimits = {},
): ChatRequest | Promise<ChatRequest> {
  const { maxChoices, maxMessages } = checkChatRequestLimits(limits);
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('body', `Expected the request body to be a JSON object, got ${describe(body)}`);
  }
  const fields = body as Record<string, unknown>;
  const { model, stream, user, n, seed, logprobs, top_logprobs: topLogprobs } = fields;
  if (!isAbsent(model) && typeof model !== 'string') {
    throw invalid('model', `\`model\` must be a string, got ${describe(model)}`);
  }
  if (!isAbsent(stream) && typeof stream !== 'boolean') {
    throw invalid('stream', `\`stream\` must be a boolean, got ${describe(stream)}`);
  }
  if (!isAbsent(user) && (typeof user !== 'string' || user.length > MAX_USER_LENGTH)) {
    throw invalid('user', `\`user\` must be a string of at most ${MAX_USER_LENGTH} characters, got ${describe(user)}`);
  }
  for (const [field, unused, what] of UNSUPPORTED) {
    const value = fields[field];
    if (!isAbsent(value) && !unused(value)) throw invalid(field, `\`${field}\`: ${what}, got ${got(value)}`);
  }
  const choices = isAbsent(n) ? 1 : n;
  if (typeof choices !== 'number' || !Number.isInteger(choices) || choices < 1 || choices > maxChoices) {
    throw invalid('n', `\`n\` must be an integer from 1 to ${maxChoices}, got ${describe(n)}`);
  }
  if (!isAbsent(seed) && !Number.isSafeInteger(seed)) {
    throw invalid('seed', `\`seed\` must be an integer, got ${describe(seed)}`);
  }
  if (!isAbsent(logprobs) && typeof logprobs !== 'boolean') {
    throw invalid('logprobs', `\`logprobs\` must be a boolean, got ${describe(logprobs)}`);
  }
  if (!isAbsent(topLogprobs)) {
    if (!Number.isInteger(topLogprobs) || (topLogprobs as number) < 0 || (topLogprobs as number) > 20) {
      throw invalid('top_logprobs', `\`top_logprobs\` must be an integer from 0 to 20, got ${describe(topLogprobs)}`);
    }
    if (logprobs !== true) throw invalid('top_logprobs', '`top_logprobs` needs `logprobs: true`');
  }
  const includeUsage = readIncludeUsage(fields.stream_options);
  const tools = readTools(fields);
  const format = readStructuredOutput(fields);
  const forced = tools === undefined ? undefined : toolGrammar(tools);
  if (forced !== undefined && format !== undefined) {
    throw invalid(
      'tool_choice',
      '`tool_choice` "required" or a named function cannot be combined with `response_format`',
    );
  }
  const grammar = forced ?? format;
  const offered = tools === undefined || tools.choice === 'none' ? undefined : tools.functions;
  const prompt = renderMessages(fields.messages, template, maxMessages, offered);
  const tokensField = isAbsent(fields.max_completion_tokens) ? 'max_tokens' : 'max_completion_tokens';
  const temperature = fields.temperature;
  const common: Record<string, unknown> = {
    prompt,
    max_tokens: fields[tokensField],
    // Above 0 and below the floor is greedy in effect (see MIN_TEMPERATURE).
    temperature: typeof temperature === 'number' && temperature > 0 && temperature < MIN_TEMPERATURE ? 0 : temperature,
    top_p: fields.top_p,
    stop: fields.stop,
  };
  if (logprobs === true) common.logprobs = isAbsent(topLogprobs) ? 0 : topLogprobs;
  if (grammar !== undefined) common.grammar = grammar;
  const inputs = validateEach(
    choices,
    (index) => {
      // Each choice its own stream: `seed` + its index, so `n: 2` with a seed gives two reproducible answers.
      const choiceSeed = isAbsent(seed) ? undefined : (seed as number) + index;
      return validate(choiceSeed === undefined ? common : { ...common, seed: choiceSeed });
    },
    (error) => renamed(error, tokensField),
  );
  // After the choices, as ever: a bad prompt is named before a bad `cache_salt`.
  const finish = (checked: TextGenerationInput[]): ChatRequest => ({
    prompt,
    inputs: checked,
    stream: stream === true,
    includeUsage,
    user: typeof user === 'string' && user !== '' ? user : undefined,
    cacheSalt: readCacheSalt(fields.cache_salt),
    logprobs: logprobs === true,
    ...(tools === undefined ? {} : { tools }),
    ...(grammar === undefined
      ? {}
      : { grammarParam: forced === undefined ? structuredOutputParam(fields) : 'tool_choice' }),
  });
  return Array.isArray(inputs) ? finish(inputs) : inputs.then(finish);
}

/** The messages, checked, as the template renders them. */
function renderMessages(
  messages: unknown,
  template: ChatTemplate,
  maxMessages: number,
  tools: ToolRequest['functions'] | undefined,
): string {
  if (!Array.isArray(messages) || messages.length === 0 || messages.length > maxMessages) {
    const got = Array.isArray(messages) ? `an array of ${messages.length}` : describe(messages);
    throw invalid('messages', `\`messages\` must be an array of 1 to ${maxMessages} messages, got ${got}`);
  }
  const checked = messages.map((message: unknown, index): ChatMessage => readMessage(message, index));
  try {
    return template.render(checked, tools);
  } catch (error) {
    // A template may refuse a conversation (`raise_exception('Roles must alternate')`): the client's problem.
    throw invalid(
      'messages',
      `The model's chat template refused \`messages\`: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

function readMessage(message: unknown, index: number): ChatMessage {
  const at = `messages[${index}]`;
  if (typeof message !== 'object' || message === null || Array.isArray(message)) {
    throw invalid(at, `\`${at}\` must be an object like {"role": "user", "content": "..."}, got ${describe(message)}`);
  }
  const { role, content, tool_calls: toolCalls, tool_call_id: toolCallId } = message as Record<string, unknown>;
  if (role === 'function') {
    throw invalid(`${at}.role`, `\`${at}.role\` \`function\` is not supported (use \`tool\`)`);
  }
  if (typeof role !== 'string' || !ROLES.has(role)) {
    throw invalid(
      `${at}.role`,
      `\`${at}.role\` must be one of "system", "developer", "user", "assistant", "tool", got ${describe(role)}`,
    );
  }
  if (role === 'tool') {
    if (typeof toolCallId !== 'string' || toolCallId.length === 0 || toolCallId.length > 256) {
      throw invalid(`${at}.tool_call_id`, `\`${at}.tool_call_id\` must be the id of the call it answers`);
    }
    return { role: 'tool', content: readContent(content, `${at}.content`), tool_call_id: toolCallId };
  }
  if (!isAbsent(toolCalls)) {
    if (role !== 'assistant') throw invalid(`${at}.tool_calls`, `\`${at}.tool_calls\` belongs to assistant messages`);
    const calls = readToolCalls(toolCalls, `${at}.tool_calls`);
    // An assistant turn that only calls tools has no content (`null`).
    const text = isAbsent(content) || content === '' ? '' : readContent(content, `${at}.content`);
    return { role: 'assistant', content: text, tool_calls: calls };
  }
  return { role: role as ChatMessage['role'], content: readContent(content, `${at}.content`) };
}

/** An assistant message's `tool_calls`: `{ id, type: 'function', function: { name, arguments } }` with JSON arguments. */
function readToolCalls(value: unknown, at: string): ChatMessageToolCall[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > 64) {
    throw invalid(at, `\`${at}\` must be an array of 1 to 64 tool calls, got ${describe(value)}`);
  }
  return value.map((call: unknown, index) => {
    const where = `${at}[${index}]`;
    const { id, type, function: fn } = (call ?? {}) as Record<string, unknown>;
    const { name, arguments: args } = (fn ?? {}) as Record<string, unknown>;
    if (typeof id !== 'string' || type !== 'function' || typeof name !== 'string' || typeof args !== 'string') {
      throw invalid(
        where,
        `\`${where}\` must be {"id": ..., "type": "function", "function": {"name": ..., "arguments": "<JSON>"}}`,
      );
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(args);
    } catch {
      throw invalid(`${where}.function.arguments`, `\`${where}.function.arguments\` must be JSON text`);
    }
    return { id, type: 'function', function: { name, arguments: parsed } };
  });
}

/** A string, or an array of `{ type: 'text', text }` parts joined with newlines. */
function readContent(content: unknown, at: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content) || content.length === 0) {
    throw invalid(at, `\`${at}\` must be a string or a non-empty array of text parts, got ${describe(content)}`);
  }
  return content
    .map((part: unknown, index) => {
      const type = (part as { type?: unknown } | null)?.type;
      const text = (part as { text?: unknown } | null)?.text;
      if (type !== 'text') {
        const what =
          typeof type === 'string' ? `\`${type}\` parts are not supported (text only)` : 'must be a text part';
        throw invalid(`${at}[${index}].type`, `\`${at}[${index}]\`: ${what}, got ${got(part)}`);
      }
      if (typeof text !== 'string') {
        throw invalid(`${at}[${index}].text`, `\`${at}[${index}].text\` must be a string, got ${describe(text)}`);
      }
      return text;
    })
    .join('\n');
}

/** The validator speaks of `prompt` and `max_tokens`; a chat request has `messages` and maybe `max_completion_tokens`. */
function renamed(error: unknown, tokensField: string): unknown {
  if (!isBatchError(error)) return error;
  const field = error.details?.field;
  if (field !== 'prompt' && field !== 'max_tokens') return error;
  const message = error.message
    .replaceAll('`prompt`', 'the rendered `messages`')
    .replaceAll('`max_tokens`', `\`${tokensField}\``)
    .replace(/^the/, 'The');
  return new BatchError(error.code, message, {
    cause: error,
    details: { ...error.details, field: field === 'prompt' ? 'messages' : tokensField },
  });
}
