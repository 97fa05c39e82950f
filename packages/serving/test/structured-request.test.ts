// Structured outputs and tools on the wire: what `response_format`, `structured_outputs`, `tools` and `tool_choice`
// become (the grammar an input carries, the tools a chat request keeps), what is refused, and how answers parse.
import { describe, expect, it } from 'vitest';
import { parseChatRequest } from '../src/openai/chat-request.js';
import { parseCompletionRequest } from '../src/openai/completion-request.js';
import { toChatCompletion, toolCallDeltas } from '../src/openai/chat-response.js';
import type { ToolCallDelta } from '../src/openai/chat-response.js';
import { parseToolCalls, readTools } from '../src/openai/tool-calls.js';
import { ToolCallStream } from '../src/openai/tool-call-stream.js';
import { PLAIN_CHAT_TEMPLATE } from '../src/openai/chat-template.js';
import { createTextGenerationParser } from '@microbatch/inference';

const validate = createTextGenerationParser();
const USER = [{ role: 'user', content: 'hi' }];
const WEATHER = {
  type: 'function',
  function: {
    name: 'weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

function fieldOf(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return { field: (error as { details?: { field?: string } }).details?.field, message: (error as Error).message };
  }
  return undefined;
}

describe('response_format and structured_outputs', () => {
  it('become the grammar of every input', () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
    const chat = parseChatRequest(
      {
        messages: USER,
        n: 2,
        response_format: { type: 'json_schema', json_schema: { name: 'n', schema, strict: true } },
      },
      validate,
    );
    expect(chat.inputs.map((input) => input.grammar)).toEqual([
      { type: 'json', schema },
      { type: 'json', schema },
    ]);
    expect(
      parseChatRequest({ messages: USER, response_format: { type: 'json_object' } }, validate).inputs[0]?.grammar,
    ).toEqual({
      type: 'json',
    });
    expect(
      parseChatRequest({ messages: USER, response_format: { type: 'text' } }, validate).inputs[0]?.grammar,
    ).toBeUndefined();
    const completion = parseCompletionRequest({ prompt: 'x', structured_outputs: { regex: '[a-z]+' } }, validate);
    expect(completion.inputs[0]?.grammar).toEqual({ type: 'regex', pattern: '[a-z]+' });
    const choice = parseCompletionRequest({ prompt: 'x', structured_outputs: { choice: ['a', 'b'] } }, validate);
    expect(choice.inputs[0]?.grammar).toEqual({ type: 'choice', choices: ['a', 'b'] });
    const json = parseCompletionRequest({ prompt: 'x', structured_outputs: { json: '{"type":"string"}' } }, validate);
    expect(json.inputs[0]?.grammar).toEqual({ type: 'json', schema: { type: 'string' } });
  });

  it.each([
    [
      {
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'a', schema: { type: 'integer', multipleOf: 3 } },
        },
      },
      'response_format',
      'multipleOf',
    ],
    [
      { response_format: { type: 'json_schema', json_schema: { name: 'bad name', schema: {} } } },
      'response_format',
      'json_schema.name',
    ],
    [{ response_format: { type: 'yaml' } }, 'response_format', '"text", "json_object" or "json_schema"'],
    [{ structured_outputs: { regex: '(a' } }, 'structured_outputs.regex', 'invalid regex'],
    [{ structured_outputs: { regex: '(?<=a)b' } }, 'structured_outputs.regex', 'cannot be enforced'],
    [{ structured_outputs: { grammar: 'root ::= "a"' } }, 'structured_outputs', 'structured_outputs.grammar'],
    [{ structured_outputs: { regex: 'a', choice: ['b'] } }, 'structured_outputs', 'exactly one'],
    [{ structured_outputs: { choice: [] } }, 'structured_outputs.choice', 'choices must be an array'],
    [
      { structured_outputs: { regex: 'a' }, response_format: { type: 'json_object' } },
      'structured_outputs',
      'cannot be combined',
    ],
  ])('refuses %j naming %s', (fields, field, words) => {
    const problem = fieldOf(() => parseCompletionRequest({ prompt: 'x', ...fields }, validate)) as {
      field: string;
      message: string;
    };
    expect(problem.field).toBe(field);
    expect(problem.message).toContain(words);
  });
});

describe('tools', () => {
  it('required and named choices become a grammar of calls; auto renders the tools into the prompt', () => {
    const required = parseChatRequest({ messages: USER, tools: [WEATHER], tool_choice: 'required' }, validate);
    const grammar = required.inputs[0]?.grammar as { type: 'json'; schema: Record<string, unknown> };
    expect(grammar.schema).toMatchObject({ type: 'array', minItems: 1, maxItems: 8 });
    const single = parseChatRequest(
      {
        messages: USER,
        tools: [WEATHER],
        tool_choice: { type: 'function', function: { name: 'weather' } },
        parallel_tool_calls: false,
      },
      validate,
    );
    expect(single.inputs[0]?.grammar).toMatchObject({ type: 'json', schema: { maxItems: 1 } });
    const auto = parseChatRequest({ messages: USER, tools: [WEATHER] }, validate, PLAIN_CHAT_TEMPLATE);
    expect(auto.inputs[0]?.grammar).toBeUndefined();
    expect(auto.prompt).toContain('"name":"weather"');
    expect(auto.tools?.choice).toBe('auto');
  });

  it('renders assistant tool calls and tool results of earlier turns', () => {
    const request = parseChatRequest(
      {
        messages: [
          ...USER,
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        ],
        tools: [WEATHER],
      },
      validate,
    );
    expect(request.prompt).toContain(
      'Assistant: <tool_call>{"name":"weather","arguments":{"city":"Oslo"}}</tool_call>',
    );
    expect(request.prompt).toContain('Tool: sunny');
  });

  it.each([
    [{ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'other' } } }, 'tool_choice'],
    [{ tools: [WEATHER, WEATHER] }, 'tools'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ tools: [WEATHER], parallel_tool_calls: 'yes' }, 'parallel_tool_calls'],
    [{ tools: [WEATHER], tool_choice: 'required', response_format: { type: 'json_object' } }, 'tool_choice'],
  ])('refuses %j naming %s', (fields, field) => {
    expect(fieldOf(() => parseChatRequest({ messages: USER, ...fields }, validate))).toMatchObject({ field });
  });

  it('parses calls from grammar output, Hermes blocks and Llama-3 JSON; a malformed call stays content', () => {
    const tools = readTools({ tools: [WEATHER] });
    if (tools === undefined) throw new Error('no tools');
    const hermes = parseToolCalls(
      'Let me check. <tool_call>{"name": "weather", "arguments": {"city": "Oslo"}}</tool_call>',
      tools,
    );
    expect(hermes.content).toBe('Let me check.');
    expect(hermes.calls.map((call) => call.function)).toEqual([{ name: 'weather', arguments: '{"city":"Oslo"}' }]);
    const llama = parseToolCalls('<|python_tag|>{"name": "weather", "parameters": {"city": "Rome"}}', tools);
    expect(llama.calls[0]?.function.arguments).toBe('{"city":"Rome"}');
    expect(parseToolCalls('<tool_call>{"name": "weather", "arguments": {</tool_call>', tools).calls).toEqual([]);
    expect(parseToolCalls('{"name": "unknown", "arguments": {}}', tools).calls).toEqual([]);
    const required = { ...tools, choice: 'required' as const };
    const forced = parseToolCalls(
      '[{"name": "weather", "arguments": {"city": "A"}}, {"name": "weather", "arguments": {"city": "B"}}]',
      required,
    );
    expect(forced.calls).toHaveLength(2);
    const cut = parseToolCalls(
      '[{"name": "weather", "arguments": {"city": "A}"}}, {"name": "weather", "argu',
      required,
    );
    expect(cut.calls.map((call) => call.function.arguments)).toEqual(['{"city":"A}"}']);
    expect(forced.calls[0]?.id).toMatch(/^call_[0-9a-f]{24}$/);
  });

  it('answers calls as message.tool_calls with finish_reason tool_calls, and streams them in pieces', () => {
    const tools = readTools({ tools: [WEATHER], tool_choice: 'required' });
    const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
    const text = `[{"name": "weather", "arguments": {"city": "${'x'.repeat(40)}"}}]`;
    const answer = toChatCompletion(
      { id: 'c', created: 1, model: 'm' },
      [{ text, finish_reason: 'stop', usage }],
      false,
      tools,
    );
    const [choice] = answer.choices;
    expect(choice?.finish_reason).toBe('tool_calls');
    expect(choice?.message.content).toBeNull();
    const calls = choice?.message.tool_calls ?? [];
    const pieces = toolCallDeltas(calls);
    expect(pieces[0]).toMatchObject({
      index: 0,
      id: calls[0]?.id,
      type: 'function',
      function: { name: 'weather', arguments: '' },
    });
    expect(
      pieces
        .slice(1)
        .map((piece) => piece.function.arguments)
        .join(''),
    ).toBe(calls[0]?.function.arguments);
    expect(pieces.length).toBeGreaterThan(2);
  });
});

describe('ToolCallStream', () => {
  it('streams forced calls as they come, in any split, adding up to the parsed calls', () => {
    const text =
      '[{"name": "weather", "arguments": {"city": "O\\"s}lo", "days": [1, 2]}}, {"name": "weather", "arguments": {"city": "Rome"}}]';
    const tools = readTools({ tools: [WEATHER], tool_choice: 'required' });
    if (tools === undefined) throw new Error('no tools');
    const expected = parseToolCalls(text, tools).calls.map((call) => call.function);
    for (const size of [1, 3, 7, 200]) {
      const stream = new ToolCallStream();
      const pieces: ToolCallDelta[] = [];
      for (let at = 0; at < text.length; at += size) pieces.push(...stream.push(text.slice(at, at + size)));
      expect(stream.calls).toBe(2);
      const calls = [0, 1].map((index) => {
        const own = pieces.filter((piece) => piece.index === index);
        expect(own[0]?.id).toMatch(/^call_/);
        return {
          name: own[0]?.function.name,
          arguments: JSON.stringify(JSON.parse(own.map((piece) => piece.function.arguments).join(''))),
        };
      });
      expect(calls).toEqual(expected);
    }
  });
});
