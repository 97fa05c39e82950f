// Structured outputs and tool calls against a real `microbatch serve` process on a generated decoder with the real
// GPT-2 vocabulary (50,257 byte-level tokens, made-up weights): the clients people use (the openai SDK's `parse()`
// with zod, the AI SDK's generateObject / streamObject / generateText with tools, LangChain's withStructuredOutput
// and bindTools). The weights are random, so every valid answer is the grammar's doing. Sampling at temperature 1.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { bundledModelDir } from '@microbatch/serving';
import { type ServerProcess, startServerProcess, writeLlamaModel } from '@microbatch/test-kit';
import { generateObject, generateText, jsonSchema, streamObject, tool } from 'ai';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const GPT2_TOKENIZER = fileURLToPath(new URL('../../../models/gpt2-tokenizer', import.meta.url));
const SHAPE = {
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  intermediate: 128,
  vocab: 50257,
  positions: 1024,
  seed: 3,
};

function serve(model: string): Promise<ServerProcess> {
  return startServerProcess({
    args: [BIN, 'serve', '--model', model, '--port', '0', '--log-format', 'json'],
    env: { ...process.env },
    ready: READY,
  });
}

/** Ten schemas: nested objects, bounded arrays, enums, integer ranges, string patterns, anyOf, optional fields. */
const SCHEMAS: readonly Record<string, unknown>[] = [
  {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
    required: ['name', 'age'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      user: {
        type: 'object',
        properties: { id: { type: 'integer', minimum: 1, maximum: 999 }, tag: { type: 'string', maxLength: 6 } },
        required: ['id', 'tag'],
        additionalProperties: false,
      },
    },
    required: ['user'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: { tags: { type: 'array', items: { type: 'string', maxLength: 5 }, minItems: 1, maxItems: 3 } },
    required: ['tags'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: { color: { enum: ['red', 'green', 'blue'] }, size: { enum: ['S', 'M', 'L'] } },
    required: ['color', 'size'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: { code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2}$' } },
    required: ['code'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      value: { anyOf: [{ type: 'integer', minimum: -5, maximum: 5 }, { type: 'boolean' }, { type: 'null' }] },
    },
    required: ['value'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      a: { type: 'boolean' },
      b: { type: 'string', maxLength: 4 },
      c: { type: 'integer', minimum: 0, maximum: 9 },
    },
    required: ['a'],
    additionalProperties: false,
  },
  {
    type: 'array',
    items: {
      type: 'object',
      properties: { x: { type: 'integer', minimum: 0, maximum: 50 }, y: { type: 'integer', minimum: 0, maximum: 50 } },
      required: ['x', 'y'],
      additionalProperties: false,
    },
    minItems: 2,
    maxItems: 4,
  },
  {
    type: 'object',
    properties: {
      status: { const: 'ok' },
      count: { type: 'integer', minimum: 0, maximum: 1000 },
      note: { type: 'string', minLength: 2, maxLength: 8 },
    },
    required: ['status', 'note'],
    additionalProperties: false,
  },
  {
    type: 'object',
    properties: {
      matrix: {
        type: 'array',
        items: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 3 }, minItems: 1, maxItems: 2 },
        minItems: 1,
        maxItems: 2,
      },
      flag: { enum: [true, false] },
    },
    required: ['matrix', 'flag'],
    additionalProperties: false,
  },
];

const WEATHER = {
  type: 'function' as const,
  function: {
    name: 'weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 10 } },
      required: ['city'],
      additionalProperties: false,
    },
  },
};

describe('structured outputs against microbatch serve on a GPT-2-vocabulary decoder', () => {
  let dir: string;
  let server: ServerProcess;
  let openai: OpenAI;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'microbatch-structured-'));
    await writeLlamaModel(join(dir, 'gpt2-tiny'), SHAPE, GPT2_TOKENIZER);
    server = await serve(join(dir, 'gpt2-tiny'));
    openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('openai chat.completions.parse() with a zod format', async () => {
    const Person = z.object({
      name: z.string().max(10),
      age: z.number().int().min(0).max(120),
      pet: z.enum(['cat', 'dog']),
    });
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const completion = await openai.chat.completions.parse({
        model: 'gpt2-tiny',
        messages: [{ role: 'user', content: 'Describe a person.' }],
        response_format: zodResponseFormat(Person, 'person'),
        temperature: 1,
        max_completion_tokens: 200,
      });
      const [choice] = completion.choices;
      expect(choice?.finish_reason).toBe('stop');
      expect(Person.parse(choice?.message.parsed)).toEqual(choice?.message.parsed);
    }
  });

  it('200 generations over 10 schemas at temperature 1 are all valid by ajv, /v1/chat/completions and /v1/completions', async () => {
    const ajv = new Ajv();
    const validators = SCHEMAS.map((schema) => ajv.compile(schema));
    const failures: string[] = [];
    const jobs = Array.from({ length: 200 }, (_, index) => index);
    const run = async (index: number) => {
      const schema = SCHEMAS[index % SCHEMAS.length] as Record<string, unknown>;
      const body =
        index % 2 === 0
          ? {
              messages: [{ role: 'user', content: `Answer ${index}` }],
              response_format: { type: 'json_schema', json_schema: { name: `s${index % 10}`, schema, strict: true } },
            }
          : { prompt: `Answer ${index}:`, structured_outputs: { json: schema } };
      const path = index % 2 === 0 ? 'chat/completions' : 'completions';
      const response = await fetch(`${server.url}/v1/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...body, temperature: 1, max_tokens: 250 }),
      });
      const answer = (await response.json()) as {
        choices: { text?: string; message?: { content: string }; finish_reason: string }[];
      };
      const [choice] = answer.choices;
      const text = choice?.text ?? choice?.message?.content ?? '';
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        failures.push(`#${index} (${choice?.finish_reason}) not JSON: ${text.slice(0, 80)}`);
        return;
      }
      const validate = validators[index % SCHEMAS.length];
      if (validate?.(value) !== true) failures.push(`#${index}: ${text} ${JSON.stringify(validate?.errors)}`);
    };
    // 16 at a time: structured rows share the decode loop's steps.
    for (let at = 0; at < jobs.length; at += 16) await Promise.all(jobs.slice(at, at + 16).map(run));
    expect(failures).toEqual([]);
  }, 300_000);

  it('regex and choice grammars, and free text sharing the server', async () => {
    const regex = await openai.completions.create({
      model: 'gpt2-tiny',
      prompt: 'Code:',
      temperature: 1,
      max_tokens: 30,
      // @ts-expect-error vLLM's extra field
      structured_outputs: { regex: '[A-Z]{2}[0-9]{3}' },
    });
    expect(regex.choices[0]?.text).toMatch(/^[A-Z]{2}[0-9]{3}$/);
    const choice = await openai.chat.completions.create({
      model: 'gpt2-tiny',
      messages: [{ role: 'user', content: 'Pick' }],
      temperature: 1,
      max_tokens: 10,
      // @ts-expect-error vLLM's extra field
      structured_outputs: { choice: ['alpha', 'beta', 'gamma'] },
    });
    expect(['alpha', 'beta', 'gamma']).toContain(choice.choices[0]?.message.content);
    const json = await openai.chat.completions.create({
      model: 'gpt2-tiny',
      messages: [{ role: 'user', content: 'JSON' }],
      temperature: 1,
      max_tokens: 60,
      response_format: { type: 'json_object' },
    });
    expect(json.choices[0]?.message.content?.startsWith('{')).toBe(true);
  });

  it('AI SDK generateObject (supportsStructuredOutputs) and streamObject', async () => {
    const provider = createOpenAICompatible({
      name: 'microbatch',
      baseURL: `${server.url}/v1`,
      supportsStructuredOutputs: true,
    });
    const schema = z.object({ title: z.string().max(12), rating: z.number().int().min(1).max(5) });
    const { object } = await generateObject({
      model: provider('gpt2-tiny'),
      schema,
      prompt: 'Review a book.',
      temperature: 1,
      maxOutputTokens: 200,
      maxRetries: 0,
    });
    expect(schema.parse(object)).toEqual(object);
    const stream = streamObject({
      model: provider('gpt2-tiny'),
      schema,
      prompt: 'Review a film.',
      temperature: 1,
      maxOutputTokens: 200,
      maxRetries: 0,
    });
    let partials = 0;
    for await (const partial of stream.partialObjectStream) if (partial !== undefined) partials += 1;
    expect(partials).toBeGreaterThan(0);
    expect(schema.parse(await stream.object)).toBeDefined();
  });

  it("AI SDK generateText with a tool and toolChoice 'required', then a second turn with the tool's result", async () => {
    const provider = createOpenAICompatible({ name: 'microbatch', baseURL: `${server.url}/v1` });
    const calls: unknown[] = [];
    const weather = tool({
      description: 'The weather in a city',
      inputSchema: jsonSchema<{ city: string }>(WEATHER.function.parameters as never),
      execute: async ({ city }) => {
        calls.push(city);
        return `sunny in ${city}`;
      },
    });
    const first = await generateText({
      model: provider('gpt2-tiny'),
      tools: { weather },
      toolChoice: 'required',
      prompt: 'What is the weather?',
      temperature: 1,
      maxOutputTokens: 250, // up to 8 parallel calls of about 15 tokens each
      maxRetries: 0,
    });
    expect(first.finishReason).toBe('tool-calls');
    expect(first.toolCalls.length).toBeGreaterThan(0);
    expect(first.toolResults.length).toBe(first.toolCalls.length);
    expect(calls.length).toBe(first.toolCalls.length);
    // The second turn sends the assistant's tool calls and the tool's results back: they must render.
    const second = await generateText({
      model: provider('gpt2-tiny'),
      tools: { weather },
      toolChoice: 'none',
      messages: [{ role: 'user', content: 'What is the weather?' }, ...first.response.messages],
      temperature: 1,
      maxOutputTokens: 8,
      maxRetries: 0,
    });
    expect(['stop', 'length']).toContain(second.finishReason);
    expect(second.response.messages.length).toBeGreaterThan(0);
  });

  it('streams required tool calls as delta.tool_calls pieces (id and name first, then arguments)', async () => {
    const stream = await openai.chat.completions.create({
      model: 'gpt2-tiny',
      messages: [{ role: 'user', content: 'Weather?' }],
      tools: [WEATHER],
      tool_choice: { type: 'function', function: { name: 'weather' } },
      parallel_tool_calls: false,
      temperature: 1,
      max_tokens: 120,
      stream: true,
    });
    const pieces: OpenAI.Chat.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      pieces.push(...(chunk.choices[0]?.delta.tool_calls ?? []));
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(pieces[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'weather' } });
    expect(pieces[0]?.id).toMatch(/^call_/);
    const args = pieces.map((piece) => piece.function?.arguments ?? '').join('');
    expect(JSON.parse(args)).toHaveProperty('city');
  });

  it('LangChain withStructuredOutput and bindTools', async () => {
    const chat = new ChatOpenAI({
      model: 'gpt2-tiny',
      apiKey: 'unused',
      configuration: { baseURL: `${server.url}/v1` },
      temperature: 1,
      maxTokens: 250,
      maxRetries: 0,
    });
    const schema = z.object({ answer: z.enum(['yes', 'no']), confidence: z.number().int().min(0).max(10) });
    const structured = chat.withStructuredOutput(schema, { name: 'verdict', method: 'jsonSchema' });
    const verdict = await structured.invoke('Is the sky blue?');
    expect(schema.parse(verdict)).toEqual(verdict);
    const withTools = chat.bindTools([WEATHER], { tool_choice: 'required' });
    const message = await withTools.invoke('Weather in Oslo?');
    expect(message.tool_calls?.length).toBeGreaterThan(0);
    expect(message.tool_calls?.[0]?.name).toBe('weather');
    expect(typeof message.tool_calls?.[0]?.args.city).toBe('string');
  });

  it('hostile grammars get 400 naming the problem, and after 50 of them structured requests still answer correctly', async () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let level = 0; level < 40; level += 1) deep = { type: 'array', items: deep };
    const hostile: [Record<string, unknown>, string, string][] = [
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
        { response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { allOf: [{}] } } } },
        'response_format',
        'allOf',
      ],
      [
        { response_format: { type: 'json_schema', json_schema: { name: 'a', schema: deep } } },
        'response_format',
        'nests deeper',
      ],
      [
        {
          response_format: {
            type: 'json_schema',
            json_schema: { name: 'a', schema: { type: 'object', description: 'x'.repeat(40_000) } },
          },
        },
        'response_format',
        'characters, more than',
      ],
      [{ structured_outputs: { regex: '([a-z' } }, 'structured_outputs.regex', 'invalid regex'],
      // Valid JSON Schema that XGrammar cannot compile: the worker's WASM instance fails and is replaced.
      [
        { response_format: { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'no-such-type' } } } },
        'response_format',
        'could not be compiled',
      ],
    ];
    for (let index = 0; index < 50; index += 1) {
      const [fields, param, words] = hostile[index % hostile.length] as [Record<string, unknown>, string, string];
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 20, ...fields }),
      });
      const body = (await response.json()) as { error: { message: string; param: string } };
      expect([response.status, body.error.param]).toEqual([400, param]);
      expect(body.error.message).toContain(words);
    }
    const validate = new Ajv().compile(SCHEMAS[0] as object);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const answer = await openai.chat.completions.create({
        model: 'gpt2-tiny',
        messages: [{ role: 'user', content: 'Person?' }],
        temperature: 1,
        max_tokens: 200,
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'p', schema: SCHEMAS[0] },
        },
      });
      expect(validate(JSON.parse(answer.choices[0]?.message.content ?? ''))).toBe(true);
    }
  }, 120_000);
});

describe('a grammar the vocabulary cannot spell', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await serve(bundledModelDir());
  }, 120_000);
  afterAll(() => server?.stop());

  it('is a 400 before generation starts (the bundled tinystories vocabulary has no `{`), streamed or not', async () => {
    for (const stream of [false, true]) {
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          messages: [{ role: 'user', content: 'x' }],
          response_format: { type: 'json_object' },
          max_tokens: 20,
          stream,
        }),
      });
      expect(response.status).toBe(400);
      const body = (await response.json()) as { error: { message: string; param: string } };
      expect(body.error.message).toContain('cannot spell this grammar');
      expect(body.error.param).toBe('response_format');
    }
    const ok = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once', max_tokens: 5, structured_outputs: { choice: ['once', 'upon'] } }),
    });
    expect(ok.status).toBe(200);
    expect(['once', 'upon']).toContain(((await ok.json()) as { choices: { text: string }[] }).choices[0]?.text);
  });
});
