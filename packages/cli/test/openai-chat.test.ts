// The official `openai` client against a real `microbatch serve` process: what users of OpenAI-compatible servers
// (vLLM, TGI) run, unchanged. Greedy decoding (temperature 0) makes the answers comparable across calls.
import { fileURLToPath } from 'node:url';
import { PLAIN_CHAT_TEMPLATE, bundledModelDir } from '@microbatch/serving';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const MODEL = bundledModelDir();
const MESSAGES: OpenAI.Chat.ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You tell short stories.' },
  { role: 'user', content: [{ type: 'text', text: 'Tell me about a cat' }] },
];
const RENDERED = 'System: You tell short stories.\nUser: Tell me about a cat\nAssistant:';

function serve(framework: string): Promise<ServerProcess> {
  const args = [BIN, 'serve', '--model', MODEL, '--port', '0', '--framework', framework, '--log-format', 'json'];
  return startServerProcess({ args, env: { ...process.env }, ready: READY });
}

function client(server: ServerProcess): OpenAI {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}

/** The 400 a request gets, as the client reports it. */
async function refusal(request: Promise<unknown>): Promise<{ status: number; message: string; param: unknown }> {
  const error = await request.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(OpenAI.APIError);
  const { status, message, param } = error as InstanceType<typeof OpenAI.APIError>;
  return { status: status ?? 0, message, param };
}

describe('openai client: chat.completions against microbatch serve (express)', () => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    server = await serve('express');
    openai = client(server);
  }, 120_000);
  afterAll(() => server?.stop());

  it('renders the documented plain template: the same text and usage as completions of the rendered prompt', async () => {
    expect(
      PLAIN_CHAT_TEMPLATE.render([
        { role: 'system', content: 'x' },
        { role: 'user', content: 'x' },
      ]),
    ).toBe('System: x\nUser: x\nAssistant:');
    const chat = await openai.chat.completions.create({
      model: 'tinystories-656k',
      messages: [...MESSAGES],
      max_completion_tokens: 16,
      temperature: 0,
    });
    expect(chat.object).toBe('chat.completion');
    expect(chat.id).toMatch(/^chatcmpl-/);
    expect(chat.choices).toHaveLength(1);
    const [choice] = chat.choices;
    expect(choice?.message.role).toBe('assistant');
    expect(choice?.message.content?.length).toBeGreaterThan(0);
    expect(choice?.logprobs).toBeNull();
    const completion = await openai.completions.create({
      model: 'tinystories-656k',
      prompt: RENDERED,
      max_tokens: 16,
      temperature: 0,
    });
    expect(choice?.message.content).toBe(completion.choices[0]?.text);
    expect(choice?.finish_reason).toBe(completion.choices[0]?.finish_reason);
    // The same counts; the completion reused the chat's prompt from the prefix cache (on by default), whole blocks.
    const { prompt_tokens_details: chatCached, ...chatCounts } = chat.usage ?? {};
    const { prompt_tokens_details: completionCached, ...completionCounts } = completion.usage ?? {};
    expect(chatCounts).toEqual(completionCounts);
    expect(chatCached).toEqual({ cached_tokens: 0 });
    expect(completionCached?.cached_tokens).toBe(16 * Math.floor(((completion.usage?.prompt_tokens ?? 0) - 1) / 16));
  });

  it('streams role, content deltas, finish_reason and usage; the streamed text equals the non-streamed', async () => {
    const request = { model: 'm', messages: [...MESSAGES], max_tokens: 20, temperature: 0 };
    const whole = await openai.chat.completions.create(request);
    const stream = await openai.chat.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.id === chunks[0]?.id)).toBe(true);
    expect(chunks[0]?.choices[0]?.delta.role).toBe('assistant');
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe(whole.choices[0]?.message.content);
    const finishing = chunks.filter((chunk) => chunk.choices[0]?.finish_reason != null);
    expect(finishing.map((chunk) => chunk.choices[0]?.finish_reason)).toEqual([whole.choices[0]?.finish_reason]);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    // The same counts; the stream's prompt came from the prefix cache the whole answer's left behind.
    expect(last?.usage).toEqual({
      ...whole.usage,
      prompt_tokens_details: { cached_tokens: 16 * Math.floor(((whole.usage?.prompt_tokens ?? 0) - 1) / 16) },
    });
    expect(chunks.slice(0, -1).every((chunk) => chunk.usage === null)).toBe(true);
  });

  it('answers n: 2 with two indexed choices; a seed makes sampled choices reproducible', async () => {
    const greedy = await openai.chat.completions.create({
      model: 'm',
      messages: [...MESSAGES],
      max_tokens: 8,
      temperature: 0,
      n: 2,
    });
    expect(greedy.choices.map((choice) => choice.index)).toEqual([0, 1]);
    expect(greedy.choices[0]?.message.content).toBe(greedy.choices[1]?.message.content);
    // The shared prompt counts once; both completions count.
    const completion = greedy.choices.length * (greedy.usage?.completion_tokens ?? 0);
    expect(greedy.usage?.completion_tokens).toBe(completion / 2);
    const sampled = { model: 'm', messages: [...MESSAGES], max_tokens: 16, temperature: 1, seed: 7, n: 2 };
    const [first, second] = await Promise.all([
      openai.chat.completions.create(sampled),
      openai.chat.completions.create(sampled),
    ]);
    expect(first.choices.map((choice) => choice.message.content)).toEqual(
      second.choices.map((choice) => choice.message.content),
    );
  });

  it('ends at a stop string, excluded from the text, with finish_reason "stop"', async () => {
    const request = { model: 'm', messages: [...MESSAGES], max_tokens: 24, temperature: 0 };
    const whole = (await openai.chat.completions.create(request)).choices[0]?.message.content ?? '';
    // A stop string from the middle of the greedy answer: the answer up to it comes back, and nothing after.
    const stop = whole.slice(Math.floor(whole.length / 2), Math.floor(whole.length / 2) + 3);
    expect(stop.length).toBe(3);
    const stopped = await openai.chat.completions.create({ ...request, stop: ['zzzz', stop] });
    expect(stopped.choices[0]?.message.content).toBe(whole.slice(0, whole.indexOf(stop)));
    expect(stopped.choices[0]?.finish_reason).toBe('stop');
    const streamed = await openai.chat.completions.create({ ...request, stop, stream: true });
    let text = '';
    for await (const chunk of streamed) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe(stopped.choices[0]?.message.content);
  });

  it('reports logprobs with top_logprobs from the decode loop, streamed and not', async () => {
    const request = {
      model: 'm',
      messages: [...MESSAGES],
      max_tokens: 10,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    };
    const chat = await openai.chat.completions.create(request);
    const content = chat.choices[0]?.logprobs?.content ?? [];
    expect(content).toHaveLength(chat.usage?.completion_tokens ?? -1);
    for (const entry of content) {
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.top_logprobs).toHaveLength(3);
      const tops = entry.top_logprobs.map((top) => top.logprob);
      expect(tops).toEqual([...tops].sort((a, b) => b - a));
      // Greedy: the chosen token is the most likely one.
      expect(entry.top_logprobs[0]?.token).toBe(entry.token);
      expect(entry.logprob).toBe(tops[0]);
      expect(entry.bytes).toEqual([...Buffer.from(entry.token, 'utf8')]);
    }
    const stream = await openai.chat.completions.create({ ...request, stream: true });
    const streamed: OpenAI.Chat.ChatCompletionTokenLogprob[] = [];
    for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    expect(streamed).toEqual(content);
  });

  it.each([
    [{ messages: [] }, 'messages', /`messages` must be an array of 1 to 256 messages, got an array of 0/],
    [
      { messages: [{ role: 'robot', content: 'hi' }] },
      'messages[0].role',
      /must be one of "system", "developer", "user", "assistant", "tool", got `"robot"`/,
    ],
    [
      { messages: [{ role: 'user', content: 5 }] },
      'messages[0].content',
      /must be a string or a non-empty array of text parts, got `5` \(number\)/,
    ],
    [{ messages: [{ role: 'user', content: 'hi' }], stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', /at most 4/],
    [
      { messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'f g' } }] },
      'tools[0].function.name',
      /must be 1 to 64 letters, digits/,
    ],
    [
      { messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'xml' } },
      'response_format',
      /must be "text", "json_object" or "json_schema"/,
    ],
    [
      { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] },
      'messages[0].content[0].type',
      /`image_url` parts are not supported/,
    ],
    [{ messages: [{ role: 'user', content: 'hi' }], top_logprobs: 2 }, 'top_logprobs', /needs `logprobs: true`/],
    [{ messages: [{ role: 'user', content: 'hi' }], n: 0 }, 'n', /`n` must be an integer from 1 to 8/],
  ])('refuses %j with 400 naming %s', async (body, param, message) => {
    const refused = await refusal(openai.chat.completions.create({ model: 'm', ...body } as never));
    expect(refused.status).toBe(400);
    expect(refused.param).toBe(param);
    expect(refused.message).toMatch(message);
  });

  it('refuses a conversation whose tokens plus max_completion_tokens pass the context, with the numbers', async () => {
    const refused = await refusal(
      openai.chat.completions.create({
        model: 'm',
        messages: [{ role: 'user', content: 'Once upon a time there was a cat. '.repeat(40) }],
        max_completion_tokens: 256,
      }),
    );
    expect(refused.status).toBe(400);
    expect(refused.param).toBe('max_completion_tokens');
    expect(refused.message).toMatch(
      /The rendered `messages` is \d+ tokens; with `max_completion_tokens` 256 it exceeds the model context of 512 tokens/,
    );
  });

  it('ignores unknown harmless fields, as OpenAI does', async () => {
    const chat = await openai.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
      store: false,
      metadata: { trace: 'x' },
      parallel_tool_calls: false,
    } as never);
    expect((chat as { object: string }).object).toBe('chat.completion');
  });
});

describe.each(['koa', 'nest', 'fastify', 'hono'])('openai client: chat.completions on the %s app', (framework) => {
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    server = await serve(framework);
    openai = client(server);
  }, 120_000);
  afterAll(() => server?.stop());

  it('answers, streams the same text, and refuses a bad body with 400 naming the field', async () => {
    const request = { model: 'm', messages: [...MESSAGES], max_tokens: 12, temperature: 0 };
    const whole = await openai.chat.completions.create(request);
    const completion = await openai.completions.create({
      model: 'm',
      prompt: RENDERED,
      max_tokens: 12,
      temperature: 0,
    });
    expect(whole.choices[0]?.message.content).toBe(completion.choices[0]?.text);
    const stream = await openai.chat.completions.create({ ...request, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe(whole.choices[0]?.message.content);
    const refused = await refusal(openai.chat.completions.create({ model: 'm', messages: [] }));
    expect([refused.status, refused.param]).toEqual([400, 'messages']);
  });
});
