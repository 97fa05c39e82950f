// How the OpenAI answers count `usage.prompt_tokens_details.cached_tokens` from their generations' usage: summed over
// a completion's prompts as `prompt_tokens` is; once for a chat's shared prompt as `prompt_tokens` is (the most a
// choice reused); left out when no generation reported it (a runner without a prefix cache).
import type { TextGenerationOutput, TokenUsage } from '@microbatch/inference';
import { describe, expect, it } from 'vitest';
import {
  chatMeta,
  completionMeta,
  toChatCompletion,
  toChatUsageChunk,
  toCompletion,
  toUsageChunk,
} from '../src/index.js';

const usage = (prompt: number, completion: number, cached?: number): TokenUsage => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
  ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
});
const output = (counts: TokenUsage): TextGenerationOutput => ({ text: 'x', finish_reason: 'length', usage: counts });

describe('usage.prompt_tokens_details.cached_tokens in the OpenAI answers', () => {
  it('completions: adds up over the prompts, whole and as the usage chunk', () => {
    const usages = [usage(40, 3, 32), usage(50, 2, 0), usage(60, 1, 48)];
    const expected = {
      prompt_tokens: 150,
      completion_tokens: 6,
      total_tokens: 156,
      prompt_tokens_details: { cached_tokens: 80 },
    };
    expect(toCompletion(completionMeta('m'), usages.map(output)).usage).toEqual(expected);
    expect(toUsageChunk(completionMeta('m'), usages).usage).toEqual(expected);
  });

  it('chat: the shared prompt and its cached tokens count once (the most a choice reused), completions add up', () => {
    const usages = [usage(40, 3, 0), usage(40, 5, 32), usage(40, 4, 16)];
    const expected = {
      prompt_tokens: 40,
      completion_tokens: 12,
      total_tokens: 52,
      prompt_tokens_details: { cached_tokens: 32 },
    };
    expect(toChatCompletion(chatMeta('m'), usages.map(output), false).usage).toEqual(expected);
    expect(toChatUsageChunk(chatMeta('m'), usages).usage).toEqual(expected);
  });

  it('reports a miss as 0, and leaves the field out when no generation reported it', () => {
    expect(toUsageChunk(completionMeta('m'), [usage(20, 1, 0)]).usage).toHaveProperty('prompt_tokens_details', {
      cached_tokens: 0,
    });
    for (const counts of [
      toCompletion(completionMeta('m'), [output(usage(20, 1))]).usage,
      toChatUsageChunk(chatMeta('m'), [usage(20, 1), usage(20, 2)]).usage,
    ]) {
      expect(counts).toBeDefined();
      expect(counts).not.toHaveProperty('prompt_tokens_details');
    }
  });
});
