// Tool calling on the wire: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls`, read into what a chat
// request needs. `required` and a named function are enforced by a grammar (the model can only write a call, as
// `[{"name": ..., "arguments": {...}}]`), so even a weak model answers valid calls; `auto` leaves the choice to the
// model through its chat template, and its answer is parsed for Hermes-style `<tool_call>{...}</tool_call>` blocks
// or a Llama-3-style JSON call. A call that does not parse, or names no declared tool, stays content.
import { randomBytes } from 'node:crypto';
import { describeValue as describe } from '@microbatch/core';
import { checkGrammarSpec } from '@microbatch/inference';
import type { GrammarSpec } from '@microbatch/inference';
import { invalidField as invalid, isAbsent } from './request-fields.js';

/** One declared function. */
export interface ToolFunction {
  readonly name: string;
  readonly description?: string;
  /** Its arguments' JSON Schema (an empty object schema when the tool gave none). */
  readonly parameters: Readonly<Record<string, unknown>>;
}

/**
 * A chat request's tools, checked.
 *
 * @example
 * ```ts
 * const tools = readTools(body); // { functions: [...], choice: 'auto', parallel: true }
 * ```
 */
export interface ToolRequest {
  readonly functions: readonly ToolFunction[];
  /** `none`: answer in text; `auto`: the model decides; `required`: at least one call; `{ name }`: that function. */
  readonly choice: 'none' | 'auto' | 'required' | { readonly name: string };
  /** Whether one answer may carry several calls. */
  readonly parallel: boolean;
}

/** One call in an answer, in OpenAI's shape (`arguments` is JSON text). */
export interface ToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

const MAX_TOOLS = 64;
const FUNCTION_NAME = /^[\w-]{1,64}$/;
/** The most calls one grammar-enforced answer may carry with `parallel_tool_calls`. */
const MAX_PARALLEL_CALLS = 8;

function readFunction(tool: unknown, index: number): ToolFunction {
  const at = `tools[${index}]`;
  const { type, function: fn } = (tool ?? {}) as Record<string, unknown>;
  if (type !== 'function' || typeof fn !== 'object' || fn === null || Array.isArray(fn)) {
    throw invalid(at, `\`${at}\` must be {"type": "function", "function": {"name": ..., "parameters": {...}}}`);
  }
  const { name, description, parameters } = fn as Record<string, unknown>;
  if (typeof name !== 'string' || !FUNCTION_NAME.test(name)) {
    throw invalid(
      `${at}.function.name`,
      `\`${at}.function.name\` must be 1 to 64 letters, digits, \`_\` or \`-\`, got ${describe(name)}`,
    );
  }
  if (!isAbsent(description) && typeof description !== 'string') {
    throw invalid(`${at}.function.description`, `\`${at}.function.description\` must be a string`);
  }
  const schema = isAbsent(parameters) ? { type: 'object', properties: {} } : parameters;
  // The parameters' schema is what a `required` call's grammar enforces: checked as one, naming the tool.
  checkGrammarSpec({ type: 'json', schema }, (_field, message) =>
    invalid(`${at}.function.parameters`, `\`${at}.function.parameters\`: ${message}`),
  );
  return {
    name,
    ...(typeof description === 'string' ? { description } : {}),
    parameters: schema as Record<string, unknown>,
  };
}

/**
 * Reads `tools`, `tool_choice` and `parallel_tool_calls`; `undefined` when the request declares no tools (then a
 * `tool_choice` other than `none` is a 400). Throws `BatchError('INVALID_INPUT')` naming the field.
 *
 * @example
 * ```ts
 * readTools({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }], tool_choice: 'required' });
 * ```
 */
export function readTools(fields: Readonly<Record<string, unknown>>): ToolRequest | undefined {
  const { tools, tool_choice: toolChoice, parallel_tool_calls: parallel } = fields;
  if (!isAbsent(parallel) && typeof parallel !== 'boolean') {
    throw invalid('parallel_tool_calls', `\`parallel_tool_calls\` must be a boolean, got ${describe(parallel)}`);
  }
  if (isAbsent(tools) || (Array.isArray(tools) && tools.length === 0)) {
    if (!isAbsent(toolChoice) && toolChoice !== 'none') {
      throw invalid('tool_choice', '`tool_choice` needs `tools`: this request declares none');
    }
    return undefined;
  }
  if (!Array.isArray(tools) || tools.length > MAX_TOOLS) {
    throw invalid('tools', `\`tools\` must be an array of at most ${MAX_TOOLS} functions, got ${describe(tools)}`);
  }
  const functions = tools.map(readFunction);
  const names = new Set(functions.map((fn) => fn.name));
  if (names.size < functions.length) throw invalid('tools', '`tools` declares a function name twice');
  let choice: ToolRequest['choice'];
  if (isAbsent(toolChoice)) choice = 'auto';
  else if (toolChoice === 'none' || toolChoice === 'auto' || toolChoice === 'required') choice = toolChoice;
  else {
    const { type, function: fn } = (typeof toolChoice === 'object' ? toolChoice : {}) as Record<string, unknown>;
    const name = (fn as { name?: unknown } | undefined)?.name;
    if (type !== 'function' || typeof name !== 'string') {
      throw invalid(
        'tool_choice',
        '`tool_choice` must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}',
      );
    }
    if (!names.has(name))
      throw invalid('tool_choice', `\`tool_choice\` names \`${name.slice(0, 64)}\`, which \`tools\` does not declare`);
    choice = { name };
  }
  return { functions, choice, parallel: parallel !== false };
}

/**
 * The grammar that enforces `required` or a named function: a JSON array of calls (one call unless parallel calls
 * are allowed), each `{"name": <declared>, "arguments": <its parameters>}`. `undefined` for `none` and `auto`.
 */
export function toolGrammar(tools: ToolRequest): GrammarSpec | undefined {
  const { choice, functions, parallel } = tools;
  if (choice === 'none' || choice === 'auto') return undefined;
  const allowed = typeof choice === 'object' ? functions.filter((fn) => fn.name === choice.name) : functions;
  const calls = allowed.map((fn) => ({
    type: 'object',
    properties: { name: { const: fn.name }, arguments: fn.parameters },
    required: ['name', 'arguments'],
    additionalProperties: false,
  }));
  const item = calls.length === 1 ? calls[0] : { anyOf: calls };
  const schema = { type: 'array', items: item, minItems: 1, maxItems: parallel ? MAX_PARALLEL_CALLS : 1 };
  return checkGrammarSpec({ type: 'json', schema }, (_field, message) => invalid('tools', `\`tools\`: ${message}`));
}

/** A fresh call id, as OpenAI writes them. */
export function toolCallId(): string {
  return `call_${randomBytes(12).toString('hex')}`;
}

function asCall(value: unknown, names: ReadonlySet<string>): ToolCall | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { name, arguments: args, parameters } = value as Record<string, unknown>;
  const given = args ?? parameters ?? {};
  if (typeof name !== 'string' || !names.has(name)) return undefined;
  if (typeof given !== 'object' || given === null || Array.isArray(given)) return undefined;
  return { id: toolCallId(), type: 'function', function: { name, arguments: JSON.stringify(given) } };
}

/** The complete `{...}` entries of a JSON array of objects whose text was cut short. */
function completeCalls(text: string): unknown[] {
  const calls: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  let escaped = false;
  for (let at = 0; at < text.length; at += 1) {
    const char = text[at];
    if (inString) {
      if (escaped) escaped = false;
      else if (char === '\\') escaped = true;
      else if (char === '"') inString = false;
      continue;
    }
    if (char === '"') inString = true;
    else if (char === '[' || char === '{') {
      depth += 1;
      if (char === '{' && depth === 2) start = at;
    } else if (char === ']' || char === '}') {
      depth -= 1;
      if (char === '}' && depth === 1 && start >= 0) calls.push(parseJson(text.slice(start, at + 1)));
    }
  }
  return calls;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * An answer's tool calls and what is left as content. With a grammar (`required`, named) the text is the JSON array
 * of calls; with `auto`, Hermes `<tool_call>` blocks or one Llama-3-style JSON call (`{"name", "parameters"}`, maybe
 * after `<|python_tag|>`). No calls: the text is all content.
 *
 * @example
 * ```ts
 * parseToolCalls('<tool_call>{"name": "f", "arguments": {}}</tool_call>', tools).calls.length; // 1
 * ```
 */
export function parseToolCalls(
  text: string,
  tools: ToolRequest,
): { readonly content: string | null; readonly calls: readonly ToolCall[] } {
  const none = { content: text, calls: [] };
  if (tools.choice === 'none') return none;
  const names = new Set(tools.functions.map((fn) => fn.name));
  if (tools.choice !== 'auto') {
    const parsed = parseJson(text);
    // Cut by `max_tokens`, the array is incomplete: its complete calls still count.
    const list = Array.isArray(parsed) ? parsed : parsed === undefined ? completeCalls(text) : [parsed];
    const calls = list.map((entry) => asCall(entry, names));
    if (calls.length === 0 || calls.some((call) => call === undefined)) return none;
    return { content: null, calls: calls as ToolCall[] };
  }
  const blocks = [...text.matchAll(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g)];
  if (blocks.length > 0) {
    const calls = blocks.map((block) => asCall(parseJson(block[1] as string), names));
    if (calls.some((call) => call === undefined)) return none;
    const rest = text.replace(/<tool_call>[\s\S]*?<\/tool_call>/g, '').trim();
    return { content: rest === '' ? null : rest, calls: (tools.parallel ? calls : calls.slice(0, 1)) as ToolCall[] };
  }
  const trimmed = text.replace(/^\s*<\|python_tag\|>/, '').trim();
  if (!trimmed.startsWith('{')) return none;
  const call = asCall(parseJson(trimmed), names);
  return call === undefined ? none : { content: null, calls: [call] };
}
