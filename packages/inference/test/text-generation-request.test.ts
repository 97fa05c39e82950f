import { BatchError } from '@microbatch/core';
import {
  createTextGenerationParser,
  createTextGenerationValidator,
  textGenerationBatchKey,
} from '@microbatch/inference';
import type { TextGenerationValidator } from '@microbatch/inference';
import { beforeAll, describe, expect, it } from 'vitest';
import { TINYSTORIES_DIR } from './helpers/paths.js';

const parse = createTextGenerationParser();

/** The INVALID_INPUT error `fn` throws, as `{ field, message }`. */
function invalid(fn: () => unknown): { field: unknown; message: string } {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(BatchError);
    expect((error as BatchError).code).toBe('INVALID_INPUT');
    return { field: (error as BatchError).details?.field, message: (error as BatchError).message };
  }
  return expect.unreachable('expected INVALID_INPUT');
}

describe('createTextGenerationParser', () => {
  it('refuses a field it does not read, naming it, instead of dropping it', () => {
    expect(invalid(() => parse({ prompt: 'Once ', max_new_tokens: 5 }))).toEqual({
      field: 'max_new_tokens',
      message:
        'Unknown field `max_new_tokens`: a text-generation body reads only prompt, max_tokens, temperature, top_p, ' +
        'stop, seed, logprobs, grammar (did you mean `max_tokens`?)',
    });
    expect(invalid(() => parse({ prompt: 'Once ', evil: { __proto__: 1 } })).field).toBe('evil');
    expect(invalid(() => parse(JSON.parse('{"prompt": "Once ", "__proto__": {"max_tokens": 9}}'))).field).toBe(
      '__proto__',
    );
  });

  it('keeps the validated fields and applies the default max_tokens', () => {
    expect(parse({ prompt: 'Once ', max_tokens: 5, temperature: 0, top_p: 0.5, stop: '.' })).toEqual({
      prompt: 'Once ',
      max_new_tokens: 5,
      temperature: 0,
      top_p: 0.5,
      stop: ['.'],
    });
    expect(parse({ prompt: 'Once ', temperature: null, top_p: null, stop: null })).toEqual({
      prompt: 'Once ',
      max_new_tokens: 64,
    });
  });

  it('names the offending field', () => {
    expect(invalid(() => parse('Once '))).toEqual({
      field: 'body',
      message: 'Expected the request body to be a JSON object, got `"Once "` (string)',
    });
    expect(invalid(() => parse({ prompt: '   ' }))).toEqual({
      field: 'prompt',
      message: '`prompt` must be a non-empty string, got `"   "` (string)',
    });
    expect(invalid(() => parse({ prompt: 42 }))).toEqual({
      field: 'prompt',
      message: '`prompt` must be a non-empty string, got `42` (number)',
    });
    expect(invalid(() => parse({ prompt: 'x'.repeat(4001) }))).toEqual({
      field: 'prompt',
      message: '`prompt` must be at most 4000 characters, got 4001',
    });
    expect(invalid(() => parse({ prompt: 'x', max_tokens: 0 }))).toEqual({
      field: 'max_tokens',
      message: '`max_tokens` must be an integer from 1 to 256, got `0` (number)',
    });
    expect(invalid(() => parse({ prompt: 'x', max_tokens: 2.5 })).field).toBe('max_tokens');
    expect(invalid(() => parse({ prompt: 'x', max_tokens: '5' })).field).toBe('max_tokens');
    expect(invalid(() => parse({ prompt: 'x', temperature: 2.5 }))).toEqual({
      field: 'temperature',
      message: '`temperature` must be a number from 0 to 2, got `2.5` (number)',
    });
    expect(invalid(() => parse({ prompt: 'x', temperature: Number.NaN })).field).toBe('temperature');
    expect(invalid(() => parse({ prompt: 'x', top_p: 0 }))).toEqual({
      field: 'top_p',
      message: '`top_p` must be a number greater than 0 and at most 1, got `0` (number)',
    });
    expect(invalid(() => parse({ prompt: 'x', stop: ['a', 'b', 'c', 'd', 'e'] }))).toEqual({
      field: 'stop',
      message:
        '`stop` must be a string or an array of at most 4 strings of 1 to 64 characters, got `["a","b","c","d","e"]` (array)',
    });
    expect(invalid(() => parse({ prompt: 'x', stop: [''] })).field).toBe('stop');
    expect(invalid(() => parse({ prompt: 'x', stop: 'y'.repeat(65) })).field).toBe('stop');
    expect(invalid(() => parse({ prompt: 'x', stop: [1] })).field).toBe('stop');
  });

  it('honours custom limits and validates them once', () => {
    const strict = createTextGenerationParser({ maxTokens: 8, defaultMaxTokens: 4, maxPromptChars: 3 });
    expect(strict({ prompt: 'abc' })).toEqual({ prompt: 'abc', max_new_tokens: 4 });
    expect(invalid(() => strict({ prompt: 'abc', max_tokens: 9 })).field).toBe('max_tokens');
    expect(() => createTextGenerationParser({ maxTokens: 0 })).toThrow(
      new TypeError('Expected `maxTokens` to be an integer >= 1, got `0` (number)'),
    );
    expect(() => createTextGenerationParser({ maxTokens: 8, defaultMaxTokens: 9 })).toThrow(
      new TypeError('Expected `defaultMaxTokens` to be an integer >= 1 and <= 8, got `9` (number)'),
    );
  });
});

describe('createTextGenerationValidator', () => {
  let validate: TextGenerationValidator;

  beforeAll(async () => {
    validate = await createTextGenerationValidator({ model: TINYSTORIES_DIR, contextLength: 10 });
  });

  it('counts prompt tokens as the model sees them (BOS included)', () => {
    expect(validate.countTokens('Once upon a time, ')).toBe(6);
    expect(validate({ prompt: 'Once upon a time, ', max_tokens: 4 })).toEqual({
      prompt: 'Once upon a time, ',
      max_new_tokens: 4,
    });
  });

  it('rejects a prompt whose tokens plus max_tokens exceed the context', () => {
    expect(invalid(() => validate({ prompt: 'Once upon a time, ', max_tokens: 5 }))).toEqual({
      field: 'max_tokens',
      message: '`prompt` is 6 tokens; with `max_tokens` 5 it exceeds the model context of 10 tokens',
    });
    expect(
      invalid(() => validate({ prompt: 'Once upon a time, there was a big red ball. ', max_tokens: 1 })).field,
    ).toBe('prompt');
  });

  it('bounds the tokenizing an invalid prompt costs: over the byte cap refused unread, a short one not tokenized', async () => {
    const wide = await createTextGenerationValidator({ model: TINYSTORIES_DIR, maxPromptChars: 200_000 });
    const calls: string[] = [];
    const count = wide.countTokens.bind(wide);
    wide.countTokens = (prompt: string) => {
      calls.push(prompt);
      return count(prompt);
    };
    // 512 tokens of context x the longest token of the bundled tokenizer (98 bytes).
    expect(wide.maxPromptBytes).toBe(512 * 98);
    const overCap = 'a'.repeat(wide.maxPromptBytes + 1);
    expect(invalid(() => wide({ prompt: overCap, max_tokens: 1 }))).toEqual({
      field: 'prompt',
      message: `\`prompt\` cannot fit the context of 512 tokens: it is ${overCap.length} bytes, more than ${512 * 98} (the context x the longest token)`,
    });
    // Every byte a token, and it still fits: no need to count.
    wide({ prompt: 'Once upon a time, ', max_tokens: 16 });
    expect(calls).toEqual([]);
    // Between the two bounds: counted once, and refused on its tokens.
    const between = 'xq zv '.repeat(400);
    expect(invalid(() => wide({ prompt: between, max_tokens: 16 })).field).toBe('prompt');
    expect(calls).toEqual([between]);
  });

  it('withCount: the same checks with the count from elsewhere, synchronous where none is needed', async () => {
    const wide = await createTextGenerationValidator({ model: TINYSTORIES_DIR, maxPromptChars: 200_000 });
    const counted: string[] = [];
    const countHere = wide.countTokens.bind(wide);
    const count = (prompt: string) => {
      counted.push(prompt);
      return Promise.resolve(countHere(prompt));
    };
    wide.countTokens = (prompt: string) => expect.unreachable(`counted ${prompt} on the calling thread`);
    // Refused or accepted by its bytes alone: answered at once, nothing counted.
    expect(wide.withCount({ prompt: 'Once upon a time, ', max_tokens: 16 }, count)).toEqual({
      prompt: 'Once upon a time, ',
      max_new_tokens: 16,
    });
    const overCap = 'a'.repeat(wide.maxPromptBytes + 1);
    expect(invalid(() => wide.withCount({ prompt: overCap, max_tokens: 1 }, count)).field).toBe('prompt');
    expect(() => wide.withCount({ prompt: 'Once ', temperature: -1 }, count)).toThrow(BatchError);
    expect(counted).toEqual([]);
    // Between the bounds: counted by `count`, decided as the validator would.
    const between = 'xq zv '.repeat(400);
    const refusal = await Promise.resolve(wide.withCount({ prompt: between, max_tokens: 16 }, count)).then(
      () => expect.unreachable('expected INVALID_INPUT'),
      (error: unknown) => error as BatchError,
    );
    expect(refusal).toBeInstanceOf(BatchError);
    expect(refusal.code).toBe('INVALID_INPUT');
    expect(refusal.details?.field).toBe('prompt');
    expect(refusal.message).toBe(
      '`prompt` is 2402 tokens; with `max_tokens` 16 it exceeds the model context of 512 tokens',
    );
    const fits = 'Once upon a time, '.repeat(30);
    await expect(wide.withCount({ prompt: fits, max_tokens: 16 }, count)).resolves.toEqual({
      prompt: fits,
      max_new_tokens: 16,
    });
    expect(counted).toEqual([between, fits]);
  });

  it('fails to load with a message naming the path', async () => {
    await expect(createTextGenerationValidator({ model: '/nonexistent/model' })).rejects.toThrow(
      /^Failed to load the tokenizer from "\/nonexistent\/model": /,
    );
  });
});

describe('textGenerationBatchKey', () => {
  it('partitions by sampling parameters only', () => {
    expect(textGenerationBatchKey({ prompt: 'a', temperature: 0, top_p: 0.3, max_new_tokens: 5 })).toBe('greedy');
    expect(textGenerationBatchKey({ prompt: 'b', temperature: 0, stop: ['x'] })).toBe('greedy');
    expect(textGenerationBatchKey({ prompt: 'a', temperature: 0.7, top_p: 0.9 })).toBe('sample:t=0.7:p=0.9');
    expect(textGenerationBatchKey({ prompt: 'a', temperature: 0.7 })).toBe('sample:t=0.7:p=default');
    expect(textGenerationBatchKey({ prompt: 'a' })).toBe('sample:t=default:p=default');
  });
});

describe('the grammar field', () => {
  it('is checked like the other fields: a bad one is INVALID_INPUT naming `grammar`', () => {
    const parse = createTextGenerationParser();
    expect(parse({ prompt: 'Once ', grammar: { type: 'choice', choices: ['a'] } }).grammar).toEqual({
      type: 'choice',
      choices: ['a'],
    });
    expect(() => parse({ prompt: 'Once ', grammar: { type: 'json', schema: { not: {} } } })).toThrow(
      'the schema keyword `not`',
    );
  });
});
