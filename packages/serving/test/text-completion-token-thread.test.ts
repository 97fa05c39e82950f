// A completion's token check runs off the main thread: the model's `validateOffThread` counts on its tokenizer
// thread and answers what `validate` (the main-thread count) answers, error for error; the request parsers keep their
// order and their field names when the check answers later.
import { BatchError } from '@microbatch/core';
import { createTextGenerationParser } from '@microbatch/inference';
import type { TextGenerationInput } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type TextCompletionModel,
  bundledModelDir,
  createTextCompletionModel,
  parseChatRequest,
  parseCompletionRequest,
} from '../src/index.js';

/** What `run` throws or rejects with, as `{ code, field, message }`. */
async function refusal(run: () => unknown): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(BatchError);
    const { code, details, message } = error as BatchError;
    return { code, field: details?.field, index: details?.index, message };
  }
  return expect.unreachable('expected a refusal');
}

const OVER_CONTEXT = 'xq zv '.repeat(400);

describe("the text-completion model's off-thread token check", () => {
  let model: TextCompletionModel;

  beforeAll(async () => {
    model = createTextCompletionModel({ model: bundledModelDir(), log: false });
    await model.ready;
  }, 60_000);

  afterAll(async () => {
    await model?.close();
  });

  it('answers at once where the bytes decide, and later, with the same error, where the tokens do', async () => {
    const short = { prompt: 'Once upon a time, ', max_tokens: 4 };
    expect(model.validateOffThread?.(short)).toEqual(model.validate(short));
    const long = { prompt: OVER_CONTEXT, max_tokens: 16 };
    const pending = model.validateOffThread?.(long);
    expect(typeof (pending as PromiseLike<unknown>)?.then).toBe('function');
    const offThread = await refusal(() => pending);
    expect(offThread).toEqual(await refusal(() => model.validate(long)));
    expect(offThread).toMatchObject({ code: 'INVALID_INPUT', field: 'prompt' });
    // Between the bounds and fitting: counted on the thread, accepted as the main thread would.
    const fits = { prompt: 'Once upon a time, '.repeat(30), max_tokens: 16 };
    await expect(model.validateOffThread?.(fits)).resolves.toEqual(model.validate(fits));
  });

  it('names the prompt of an array and the rendered messages of a chat as the main-thread check does', async () => {
    const offThread = (body: unknown) => (model.validateOffThread as (body: unknown) => unknown)(body);
    const completion = { prompt: ['Once ', OVER_CONTEXT], max_tokens: 16 };
    const later = await refusal(() =>
      parseCompletionRequest(completion, offThread as (body: unknown) => Promise<TextGenerationInput>),
    );
    expect(later).toEqual(await refusal(() => parseCompletionRequest(completion, model.validate)));
    expect(later).toMatchObject({ field: 'prompt', index: 1 });
    expect((later as { message: string }).message).toMatch(/^`prompt\[1\]` is \d+ tokens/);
    const chat = { messages: [{ role: 'user', content: OVER_CONTEXT }], max_completion_tokens: 16 };
    const chatLater = await refusal(() =>
      parseChatRequest(chat, offThread as (body: unknown) => Promise<TextGenerationInput>),
    );
    expect(chatLater).toEqual(await refusal(() => parseChatRequest(chat, model.validate)));
    expect(chatLater).toMatchObject({ field: 'messages' });
  });
});

describe('request parsers over a validate that answers later', () => {
  const parse = createTextGenerationParser();
  const later = (body: unknown) => Promise.resolve().then(() => parse(body));

  it('resolve to what the synchronous parse returns', async () => {
    const body = { prompt: ['A ', 'B '], temperature: 0, cache_salt: 'abc' };
    await expect(parseCompletionRequest(body, later)).resolves.toEqual(parseCompletionRequest(body, parse));
  });

  it('check in order and stop at the first bad input: nothing after it is validated', async () => {
    const seen: unknown[] = [];
    const counting = (body: unknown) => {
      seen.push((body as { prompt: unknown }).prompt);
      return Promise.resolve().then(() => parse(body));
    };
    const error = await refusal(() => parseCompletionRequest({ prompt: ['A ', ' ', 'C '] }, counting));
    expect(error).toMatchObject({ field: 'prompt', index: 1 });
    expect(seen).toEqual(['A ', ' ']);
    // A bad `cache_salt` is named only once every prompt passed, as in the synchronous parse.
    const salt = await refusal(() => parseCompletionRequest({ prompt: 'A ', cache_salt: 7 }, later));
    expect(salt).toEqual(await refusal(() => parseCompletionRequest({ prompt: 'A ', cache_salt: 7 }, parse)));
  });
});
