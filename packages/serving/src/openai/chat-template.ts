import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';

/**
 * One chat message as the template sees it: content already joined to one string.
 *
 * @example
 * ```ts
 * const message: ChatMessage = { role: 'user', content: 'Tell me a story.' };
 * ```
 */
export interface ChatMessage {
  readonly role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  readonly content: string;
  /** An assistant turn's tool calls, `arguments` parsed (chat templates read them as objects). */
  readonly tool_calls?: readonly ChatMessageToolCall[];
  /** A `tool` message: the call it answers. */
  readonly tool_call_id?: string;
}

/**
 * A tool call of an earlier assistant turn, as chat templates read it.
 *
 * @example
 * ```ts
 * const call: ChatMessageToolCall = { id: 'call_1', type: 'function', function: { name: 'f', arguments: { x: 1 } } };
 * ```
 */
export interface ChatMessageToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: unknown };
}

/**
 * A function the request declares, as chat templates read it (`tools`: `{ type: 'function', function }` entries).
 *
 * @example
 * ```ts
 * const tool: ChatTemplateTool = { name: 'weather', parameters: { type: 'object' } };
 * ```
 */
export interface ChatTemplateTool {
  readonly name: string;
  readonly description?: string;
  readonly parameters: Readonly<Record<string, unknown>>;
}

/**
 * Turns a conversation into the prompt the model continues, the assistant's turn opened.
 *
 * @example
 * ```ts
 * const template = loadChatTemplate('models/tinystories-656k');
 * template.render([{ role: 'user', content: 'Hi' }]); // 'User: Hi\nAssistant:'
 * ```
 */
export interface ChatTemplate {
  /** `'model'`: the model's own Jinja template (`tokenizer_config.json`); `'plain'`: the role-prefixed fallback. */
  readonly kind: 'model' | 'plain';
  /** The prompt; `tools`, when given, are the functions the model may call (the template's `tools` variable). */
  render(messages: readonly ChatMessage[], tools?: readonly ChatTemplateTool[]): string;
}

const ROLE_NAMES: Readonly<Record<ChatMessage['role'], string>> = {
  system: 'System',
  developer: 'System',
  user: 'User',
  assistant: 'Assistant',
  tool: 'Tool',
};

/** A plain-template line's content: an assistant's tool calls as Hermes-style `<tool_call>` blocks after its text. */
function plainContent(message: ChatMessage): string {
  const calls = (message.tool_calls ?? []).map(
    (call) =>
      `<tool_call>${JSON.stringify({ name: call.function.name, arguments: call.function.arguments })}</tool_call>`,
  );
  return [message.content, ...calls].filter((part) => part !== '').join('');
}

/**
 * The fallback for a model without a chat template (the bundled TinyStories model): one `Role: content` line per
 * message (`developer` is shown as `System`), then `Assistant:` for the model to continue.
 *
 * @example
 * ```ts
 * PLAIN_CHAT_TEMPLATE.render([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }]);
 * // 'System: Be brief.\nUser: Hi\nAssistant:'
 * ```
 */
export const PLAIN_CHAT_TEMPLATE: ChatTemplate = {
  kind: 'plain',
  render: (messages, tools) =>
    (tools === undefined || tools.length === 0
      ? ''
      : `System: You may call these tools, each as <tool_call>{"name": ..., "arguments": {...}}</tool_call>: ${JSON.stringify(tools)}\n`) +
    `${messages.map((message) => `${ROLE_NAMES[message.role]}: ${plainContent(message)}\n`).join('')}Assistant:`,
};

interface TokenizerConfig {
  readonly chat_template?: unknown;
  readonly bos_token?: unknown;
  readonly eos_token?: unknown;
  readonly pad_token?: unknown;
  readonly unk_token?: unknown;
}

/** A special token as tokenizer_config.json writes it: a string or `{ content }`. */
function tokenText(token: unknown): string | undefined {
  if (typeof token === 'string') return token;
  const content = (token as { content?: unknown } | null)?.content;
  return typeof content === 'string' ? content : undefined;
}

/** The default template: a string, or the one named `default` in a list of named templates. */
function templateSource(chatTemplate: unknown): string | undefined {
  if (typeof chatTemplate === 'string') return chatTemplate;
  if (!Array.isArray(chatTemplate)) return undefined;
  const named = chatTemplate.find((entry: { name?: unknown }) => entry?.name === 'default') as
    | { template?: unknown }
    | undefined;
  return typeof named?.template === 'string' ? named.template : undefined;
}

/**
 * The chat template of a model folder: `chat_template` from its `tokenizer_config.json`, rendered with
 * `@huggingface/jinja` as transformers.js' `apply_chat_template(messages, { add_generation_prompt: true })` does
 * (with `bos_token`, `eos_token`, `pad_token`, `unk_token` as variables); {@link PLAIN_CHAT_TEMPLATE} where the
 * folder has none. A template that does not parse throws an `Error` naming the folder, at start rather than per
 * request.
 *
 * @example
 * ```ts
 * const template = loadChatTemplate('models/qwen2.5-0.5b-instruct');
 * template.kind; // 'model'
 * ```
 */
export function loadChatTemplate(modelDir: string): ChatTemplate {
  let config: TokenizerConfig;
  try {
    config = JSON.parse(readFileSync(join(modelDir, 'tokenizer_config.json'), 'utf8')) as TokenizerConfig;
  } catch {
    return PLAIN_CHAT_TEMPLATE;
  }
  const source = templateSource(config.chat_template);
  if (source === undefined) return PLAIN_CHAT_TEMPLATE;
  let template: Template;
  try {
    template = new Template(source);
  } catch (error) {
    throw new Error(
      `The chat template of ${modelDir} does not parse: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  const specials = Object.fromEntries(
    (['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const).flatMap((name) => {
      const text = tokenText(config[name]);
      return text === undefined ? [] : [[name, text]];
    }),
  );
  return {
    kind: 'model',
    render: (messages, tools) =>
      template.render({
        ...specials,
        messages: messages.map((message) => ({ ...message })),
        ...(tools === undefined || tools.length === 0
          ? {}
          : { tools: tools.map((tool) => ({ type: 'function', function: { ...tool } })) }),
        add_generation_prompt: true,
      }),
  };
}
