import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isBatchError } from '@microbatch/core';
import { createTextGenerationParser } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseChatRequest } from '../src/openai/chat-request.js';
import { PLAIN_CHAT_TEMPLATE, loadChatTemplate } from '../src/openai/chat-template.js';

const validate = createTextGenerationParser();
// ChatML as Qwen's tokenizer_config.json writes it (shortened), with the special tokens as objects.
const CHATML =
  "{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

function refusal(body: unknown): { field: unknown; message: string } {
  try {
    parseChatRequest(body, validate);
  } catch (error) {
    if (!isBatchError(error) || error.code !== 'INVALID_INPUT') throw error;
    return { field: error.details?.field, message: error.message };
  }
  throw new Error('expected a refusal');
}

describe('chat templates', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'chat-template-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("renders the model's Jinja template with its special tokens and the generation prompt", async () => {
    await writeFile(
      join(dir, 'tokenizer_config.json'),
      JSON.stringify({ chat_template: CHATML, bos_token: { content: '<s>' }, eos_token: '</s>' }),
    );
    const template = loadChatTemplate(dir);
    expect(template.kind).toBe('model');
    expect(
      template.render([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ]),
    ).toBe('<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
  });

  it('falls back to role-prefixed turns without a template, and refuses one that does not parse', async () => {
    const bare = await mkdtemp(join(dir, 'bare-'));
    expect(loadChatTemplate(bare)).toBe(PLAIN_CHAT_TEMPLATE);
    expect(
      PLAIN_CHAT_TEMPLATE.render([
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello' },
        { role: 'user', content: 'A story?' },
      ]),
    ).toBe('System: Be brief.\nUser: Hi\nAssistant: Hello\nUser: A story?\nAssistant:');
    const broken = await mkdtemp(join(dir, 'broken-'));
    await writeFile(join(broken, 'tokenizer_config.json'), JSON.stringify({ chat_template: '{% for x in %}' }));
    expect(() => loadChatTemplate(broken)).toThrow(/^The chat template of .*broken-.* does not parse/);
  });
});

describe('parseChatRequest', () => {
  it('renders the messages once and makes one input per choice, seeds counted up from `seed`', () => {
    const request = parseChatRequest(
      {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Hi' },
              { type: 'text', text: 'there' },
            ],
          },
        ],
        n: 3,
        seed: 5,
        max_completion_tokens: 9,
        max_tokens: 100,
        temperature: 0.7,
        logprobs: true,
        top_logprobs: 2,
        stop: 'The end',
        user: 'alice',
        stream: true,
        stream_options: { include_usage: true },
        store: true, // unknown to this server, harmless: ignored
      },
      validate,
    );
    expect(request.prompt).toBe('User: Hi\nthere\nAssistant:');
    expect(request.inputs).toEqual(
      [5, 6, 7].map((seed) => ({
        prompt: 'User: Hi\nthere\nAssistant:',
        max_new_tokens: 9,
        temperature: 0.7,
        stop: ['The end'],
        seed,
        logprobs: 2,
      })),
    );
    expect([request.stream, request.includeUsage, request.user, request.logprobs]).toEqual([true, true, 'alice', true]);
  });

  it.each([
    [{}, 'messages', '`messages` must be an array of 1 to 256 messages, got `undefined` (undefined)'],
    [{ messages: [] }, 'messages', '`messages` must be an array of 1 to 256 messages, got an array of 0'],
    [
      { messages: ['hi'] },
      'messages[0]',
      '`messages[0]` must be an object like {"role": "user", "content": "..."}, got `"hi"` (string)',
    ],
    [
      { messages: [{ role: 'function', content: 'x', name: 'a' }] },
      'messages[0].role',
      '`messages[0].role` `function` is not supported (use `tool`)',
    ],
    [
      { messages: [{ role: 'user', content: null }] },
      'messages[0].content',
      '`messages[0].content` must be a string or a non-empty array of text parts, got `null` (null)',
    ],
    [
      { messages: [{ role: 'user', content: [{ type: 'text', text: 1 }] }] },
      'messages[0].content[0].text',
      '`messages[0].content[0].text` must be a string, got `1` (number)',
    ],
    [
      { messages: [{ role: 'user', content: [{ type: 'input_audio' }] }] },
      'messages[0].content[0].type',
      '`messages[0].content[0]`: `input_audio` parts are not supported (text only), got an object',
    ],
    [
      { messages: [{ role: 'assistant', content: 'x', tool_calls: [] }] },
      'messages[0].tool_calls',
      '`messages[0].tool_calls` must be an array of 1 to 64 tool calls, got `[]` (array)',
    ],
    [
      { messages: [{ role: 'user', content: 'x' }], tool_choice: 'auto' },
      'tool_choice',
      '`tool_choice` needs `tools`: this request declares none',
    ],
    [
      { messages: [{ role: 'user', content: 'x' }], audio: { voice: 'alloy' } },
      'audio',
      '`audio`: audio output is not supported, got an object',
    ],
    [
      { messages: [{ role: 'user', content: 'x' }], presence_penalty: 1 },
      'presence_penalty',
      '`presence_penalty`: presence_penalty is not supported (only 0), got `1` (number)',
    ],
    [
      { messages: [{ role: 'user', content: 'x' }], top_logprobs: 21, logprobs: true },
      'top_logprobs',
      '`top_logprobs` must be an integer from 0 to 20, got `21` (number)',
    ],
    [
      { messages: [{ role: 'user', content: 'x' }], seed: 1.5 },
      'seed',
      '`seed` must be an integer, got `1.5` (number)',
    ],
    [{ messages: [{ role: 'user', content: 'x' }], n: 9 }, 'n', '`n` must be an integer from 1 to 8, got `9` (number)'],
    [
      { messages: [{ role: 'user', content: 'x' }], max_completion_tokens: 0 },
      'max_completion_tokens',
      '`max_completion_tokens` must be an integer from 1 to 256, got `0` (number)',
    ],
    [
      { messages: [{ role: 'user', content: 'x' }], stop: ['a', 'b', 'c', 'd', 'e'] },
      'stop',
      '`stop` must be a string or an array of at most 4 strings of 1 to 64 characters, got `["a","b","c","d","e"]` (array)',
    ],
  ])('refuses %j naming %s', (body, field, message) => {
    expect(refusal(body)).toEqual({ field, message });
  });

  it("turns a template's own refusal into a 400 on `messages`", () => {
    const strict = {
      kind: 'model' as const,
      render: () => {
        throw new Error('Conversation roles must alternate user/assistant/user/assistant/...');
      },
    };
    expect(() => parseChatRequest({ messages: [{ role: 'user', content: 'x' }] }, validate, strict)).toThrow(
      "The model's chat template refused `messages`: Conversation roles must alternate",
    );
  });
});
