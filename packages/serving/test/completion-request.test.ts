import { BatchError } from '@microbatch/core';
import { createTextGenerationParser } from '@microbatch/inference';
import { describe, expect, it } from 'vitest';
import {
  MIN_TEMPERATURE,
  OPENAI_DEFAULT_MAX_TOKENS,
  mergeStreams,
  parseCompletionRequest,
  parseTextQuery,
} from '../src/index.js';

const parse = createTextGenerationParser();

function fieldOf(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(BatchError);
    return {
      code: (error as BatchError).code,
      details: (error as BatchError).details,
      message: (error as BatchError).message,
    };
  }
  throw new Error('expected a throw');
}

describe('parseCompletionRequest', () => {
  it("turns each prompt into one input with OpenAI's default max_tokens, keeping the sampling fields", () => {
    expect(parseCompletionRequest({ prompt: ['A ', 'B '], temperature: 0, top_p: 0.5, stop: '.' }, parse)).toEqual({
      inputs: [
        { prompt: 'A ', max_new_tokens: OPENAI_DEFAULT_MAX_TOKENS, temperature: 0, top_p: 0.5, stop: ['.'] },
        { prompt: 'B ', max_new_tokens: OPENAI_DEFAULT_MAX_TOKENS, temperature: 0, top_p: 0.5, stop: ['.'] },
      ],
      stream: false,
      includeUsage: false,
    });
    expect(
      parseCompletionRequest(
        { prompt: 'A', stream: true, stream_options: { include_usage: true }, max_tokens: 3 },
        parse,
      ),
    ).toEqual({
      inputs: [{ prompt: 'A', max_new_tokens: 3 }],
      stream: true,
      includeUsage: true,
    });
  });

  it('serves a temperature above 0 and below MIN_TEMPERATURE as greedy (0), and `max_tokens: 1.0` as the integer 1', () => {
    const temperatureOf = (temperature: number) =>
      parseCompletionRequest({ prompt: 'A', temperature }, parse).inputs[0]?.temperature;
    expect([1e-45, 5e-324, MIN_TEMPERATURE / 2].map(temperatureOf)).toEqual([0, 0, 0]);
    expect([0, MIN_TEMPERATURE, 0.7].map(temperatureOf)).toEqual([0, MIN_TEMPERATURE, 0.7]);
    expect(fieldOf(() => parseCompletionRequest({ prompt: 'A', temperature: -1e-45 }, parse))).toMatchObject({
      details: { field: 'temperature' },
    });
    expect(JSON.parse('{"prompt": "A", "max_tokens": 1.0}')).toEqual({ prompt: 'A', max_tokens: 1 });
    expect(
      parseCompletionRequest(JSON.parse('{"prompt": "A", "max_tokens": 1.0}'), parse).inputs[0]?.max_new_tokens,
    ).toBe(1);
  });

  it('refuses `__proto__` and `constructor` as unread fields, with no hint read through a prototype', () => {
    const body = JSON.parse('{"prompt": "A", "__proto__": {"max_tokens": 200}}') as unknown;
    expect(fieldOf(() => parseCompletionRequest(body, parse))).toEqual({
      code: 'INVALID_INPUT',
      details: { field: '__proto__' },
      message: 'Unknown field `__proto__`: this server does not read it, and it could change the answer',
    });
    expect(fieldOf(() => parseCompletionRequest({ prompt: 'A', constructor: {} }, parse))).toMatchObject({
      details: { field: 'constructor' },
    });
  });

  it('names the field, and the index of a bad prompt in an array', () => {
    expect(fieldOf(() => parseCompletionRequest({ prompt: ['ok', ''] }, parse))).toEqual({
      code: 'INVALID_INPUT',
      details: { field: 'prompt', index: 1 },
      message: '`prompt[1]` must be a non-empty string, got `""` (string)',
    });
    expect(fieldOf(() => parseCompletionRequest({ prompt: 'a', echo: true }, parse))).toEqual({
      code: 'INVALID_INPUT',
      details: { field: 'echo' },
      message: '`echo: true` is not supported, got `true` (boolean)',
    });
    expect(fieldOf(() => parseCompletionRequest({ prompt: ['a', 'b', 'c'] }, parse, { maxPrompts: 2 }))).toEqual({
      code: 'INVALID_INPUT',
      details: { field: 'prompt' },
      message: '`prompt` must be a string or an array of 1 to 2 strings, got an array of 3',
    });
    expect(
      fieldOf(() => parseCompletionRequest({ prompt: 'a', stream_options: { include_usage: 'yes' } }, parse)),
    ).toMatchObject({
      details: { field: 'stream_options' },
    });
  });

  it('refuses unknown fields that could change the answer, naming them (never dropped in silence)', () => {
    expect(fieldOf(() => parseCompletionRequest({ prompt: 'A', max_new_tokens: 5 }, parse))).toEqual({
      code: 'INVALID_INPUT',
      details: { field: 'max_new_tokens' },
      message:
        'Unknown field `max_new_tokens`: this server does not read it, and it could change the answer ' +
        '(did you mean `max_tokens`?)',
    });
    expect(fieldOf(() => parseCompletionRequest({ prompt: 'A', top_k: 5, repetition_penalty: 1.2 }, parse))).toEqual({
      code: 'INVALID_INPUT',
      details: { field: 'top_k' },
      message:
        'Unknown fields `top_k`, `repetition_penalty`: this server does not read them, and they could change the answer',
    });
  });

  it("accepts OpenAI's fields it cannot honour only at their neutral value, and ignores bookkeeping fields", () => {
    const neutral = { n: 1, best_of: 1, echo: false, frequency_penalty: 0, presence_penalty: 0, logit_bias: {} };
    const bookkeeping = { metadata: { run: 'a' }, store: false, service_tier: 'auto' };
    expect(parseCompletionRequest({ prompt: 'A', max_tokens: 3, ...neutral, ...bookkeeping }, parse).inputs).toEqual([
      { prompt: 'A', max_new_tokens: 3 },
    ]);
    for (const [field, value] of [
      ['presence_penalty', 0.5],
      ['frequency_penalty', 1],
      ['logit_bias', { 50256: -100 }],
      ['seed', 7],
    ] as const) {
      expect(fieldOf(() => parseCompletionRequest({ prompt: 'A', [field]: value }, parse))).toMatchObject({
        code: 'INVALID_INPUT',
        details: { field },
      });
    }
  });

  it('throws a TypeError for a bad maxPrompts', () => {
    expect(() => parseCompletionRequest({ prompt: 'a' }, parse, { maxPrompts: 0 })).toThrow(
      new TypeError('Expected `maxPrompts` to be an integer >= 1, got `0` (number)'),
    );
  });
});

describe('parseTextQuery', () => {
  it('ends the prompt with a space and generates greedily', () => {
    expect(parseTextQuery('Once upon a time', parse)).toEqual({
      prompt: 'Once upon a time ',
      max_new_tokens: 64,
      temperature: 0,
    });
    expect(parseTextQuery('Hi\n', parse).prompt).toBe('Hi\n');
  });

  it('names `text` in its errors', () => {
    expect(fieldOf(() => parseTextQuery(['a', 'b'], parse))).toEqual({
      code: 'INVALID_INPUT',
      details: { field: 'text' },
      message: 'Query parameter `text` must be given once, got 2 values',
    });
    expect(fieldOf(() => parseTextQuery('x'.repeat(4001), parse))).toEqual({
      code: 'INVALID_INPUT',
      details: { field: 'text' },
      message: '`text` must be at most 4000 characters, got 4001',
    });
  });
});

describe('mergeStreams', () => {
  async function* values<T>(items: T[], onReturn?: () => void): AsyncGenerator<T> {
    try {
      for (const item of items) {
        await new Promise((resolve) => setImmediate(resolve));
        yield item;
      }
    } finally {
      onReturn?.();
    }
  }

  it('yields every value of every source with its index, in each source’s order', async () => {
    const seen: [number, string][] = [];
    for await (const entry of mergeStreams([values(['a1', 'a2', 'a3']), values(['b1'])])) seen.push(entry);
    expect(seen.filter(([i]) => i === 0).map(([, v]) => v)).toEqual(['a1', 'a2', 'a3']);
    expect(seen.filter(([i]) => i === 1).map(([, v]) => v)).toEqual(['b1']);
  });

  it('returns the sources still open when the consumer stops early or one fails', async () => {
    let returned = 0;
    for await (const [, value] of mergeStreams([
      values([1, 2, 3], () => (returned += 1)),
      values([4, 5, 6], () => (returned += 1)),
    ])) {
      if (value > 0) break;
    }
    expect(returned).toBe(2);
    async function* failing(): AsyncGenerator<number> {
      yield await Promise.reject(new Error('boom'));
    }
    let closed = false;
    await expect(async () => {
      for await (const _ of mergeStreams([failing(), values([1, 2], () => (closed = true))]));
    }).rejects.toThrow('boom');
    expect(closed).toBe(true);
  });
});
