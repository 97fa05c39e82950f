// The runner-side check of `resume_tokens` (a stream another worker continues): token ids, at most
// `max_new_tokens`, not with `logprobs`; absent for a fresh request.
import { describe, expect, it } from 'vitest';
import { InputError } from '../src/contract/errors.js';
import { checkGenerationInput } from '../src/runners/generation-request.js';
import { TEXT_GENERATION_DEFAULTS, textGenerationResume } from '../src/spec/runner-spec.js';

const encode = (text: string): number[] => Array.from({ length: text.length }, (_, index) => text.charCodeAt(index));
const check = (input: unknown) => checkGenerationInput(input, TEXT_GENERATION_DEFAULTS, encode, 512);

describe('resume_tokens', () => {
  it('continues after the ids given; a fresh request has none', () => {
    expect(check({ prompt: 'Once', max_new_tokens: 8 }).resume).toBeUndefined();
    expect(check({ prompt: 'Once', max_new_tokens: 8, resume_tokens: [] }).resume).toEqual([]);
    expect(check({ prompt: 'Once', max_new_tokens: 8, resume_tokens: [5, 0, 17] }).resume).toEqual([5, 0, 17]);
    // As many as `max_new_tokens`: the final chunk went out, only the answer was lost (the row ends at once).
    expect(check({ prompt: 'Once', max_new_tokens: 2, resume_tokens: [5, 17] }).resume).toEqual([5, 17]);
  });

  it('refuses what is not token ids, a generation that had ended, and logprobs, naming the field', () => {
    for (const resume of ['abc', [1.5], [-1], Array.from({ length: 9 }, () => 1)]) {
      expect(() => check({ prompt: 'Once', max_new_tokens: 8, resume_tokens: resume })).toThrow(
        expect.objectContaining({ field: 'resume_tokens' }),
      );
    }
    expect(() => check({ prompt: 'Once', max_new_tokens: 8, resume_tokens: [1], logprobs: 0 })).toThrow(
      new InputError('resume_tokens', '`resume_tokens` cannot be combined with `logprobs`'),
    );
  });

  it('textGenerationResume builds the input and reads the ids of a chunk', () => {
    const input = { prompt: 'Once', max_new_tokens: 8 };
    expect(textGenerationResume.withTokens(input, [3, 4])).toEqual({ ...input, resume_tokens: [3, 4] });
    expect(input).toEqual({ prompt: 'Once', max_new_tokens: 8 });
    expect(textGenerationResume.tokensOf({ text: 'a', finish_reason: null, usage: null, tokens: [9] })).toEqual([9]);
    expect(textGenerationResume.tokensOf({ text: 'a', finish_reason: null, usage: null })).toBeUndefined();
  });
});
