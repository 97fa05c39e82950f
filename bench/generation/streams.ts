// What the long-prompt and shared-prefix scenarios of `pnpm bench:generation` share: a continuous pool with some
// runner options (or the reason the runner refused them), streaming one request while timing its chunks, prompts
// of a given length in words, and percentiles.
import { createStreamingBatcher } from '@microbatch/core';
import type { StreamingBatcher } from '@microbatch/core';
import { TEXT_GENERATION_DEFAULTS, createWorkerPool } from '@microbatch/inference';
import type {
  TextGenerationChunk,
  TextGenerationInput,
  TextGenerationOutput,
  TextGenerationRunnerSpec,
  WorkerPool,
} from '@microbatch/inference';

export type Pool = WorkerPool<TextGenerationInput, TextGenerationOutput, TextGenerationChunk>;
export type Streamer = StreamingBatcher<TextGenerationInput, TextGenerationChunk>;

/** Whether this build's text-generation runner has an option (each one has a default in TEXT_GENERATION_DEFAULTS). */
export function runnerHas(option: string): boolean {
  return option in TEXT_GENERATION_DEFAULTS;
}

/**
 * A continuous pool with `runner` options on top of the defaults, ready, or why not. An option the runner does not
 * have (every option has a default in TEXT_GENERATION_DEFAULTS) is refused here by name, so a scenario never reports
 * a variant that ran without it.
 */
export async function variantPool(
  model: string,
  runner: Partial<TextGenerationRunnerSpec>,
): Promise<{ pool: Pool; streamer: Streamer } | { refused: string }> {
  const unknown = Object.keys(runner).filter((key) => !runnerHas(key));
  if (unknown.length > 0) {
    return {
      refused: `this build's text-generation runner has no ${unknown.map((key) => `\`${key}\``).join(', ')} option`,
    };
  }
  let pool: Pool | undefined;
  try {
    pool = createWorkerPool({ runner: { task: 'text-generation', model, scheduling: 'continuous', ...runner } });
    await pool.ready;
  } catch (error) {
    await pool?.close();
    return { refused: error instanceof Error ? error.message : String(error) };
  }
  const streamer = createStreamingBatcher(pool.streamingHandler, {
    ...pool.batcherOptions,
    batchWaitTimeoutMs: 0,
    maxQueueSize: 10_000,
  });
  return { pool, streamer };
}

/** The change of a pool's runner counters whose names match `pattern` (summed over its workers) since `before`. */
export async function statsDelta(
  pool: Pool,
  pattern: RegExp,
  before: Readonly<Record<string, number>> = {},
): Promise<Record<string, number>> {
  const now: Record<string, number> = {};
  for (const stats of await pool.runnerStats()) {
    for (const [key, value] of Object.entries(stats)) {
      if (pattern.test(key)) now[key] = (now[key] ?? 0) + value;
    }
  }
  return Object.fromEntries(Object.entries(now).map(([key, value]) => [key, value - (before[key] ?? 0)]));
}

/** What streaming one request measured: when it was sent, when each chunk came, its first token, its usage. */
export interface Streamed {
  readonly sentAt: number;
  /** `performance.now()` of every chunk. */
  readonly chunkTimes: number[];
  /** Time to the first chunk with text (or the end), in ms. */
  readonly ttftMs: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

export async function streamOne(streamer: Streamer, input: TextGenerationInput): Promise<Streamed> {
  const sentAt = performance.now();
  const chunkTimes: number[] = [];
  let ttftMs: number | undefined;
  let usage: TextGenerationChunk['usage'] = null;
  for await (const chunk of streamer.stream(input)) {
    const now = performance.now();
    chunkTimes.push(now);
    if (ttftMs === undefined && (chunk.text.length > 0 || chunk.finish_reason !== null)) ttftMs = now - sentAt;
    usage = chunk.usage ?? usage;
  }
  return {
    sentAt,
    chunkTimes,
    ttftMs: ttftMs ?? Number.NaN,
    promptTokens: usage?.prompt_tokens ?? 0,
    completionTokens: usage?.completion_tokens ?? 0,
  };
}

const STORY = (
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. ' +
  'One day, Lily saw a big red ball under a tree. She wanted to play with it, but it was too high. Lily asked her ' +
  'mom for help. Her mom smiled and said, "Let us get it together." They found a long stick and pushed the ball ' +
  'down. Lily was very happy and played with the ball all day. When the sun went down, she went home and told her ' +
  'dad about the ball. Her dad hugged her and said she was a good girl. The next day, Lily took the ball to the ' +
  'park again and shared it with her friends. They all laughed and ran in the warm sun.'
).split(' ');

/** Tokens per word of the story with the bundled tokenizer (measured: 480 words are 372-381 tokens). */
export const TOKENS_PER_WORD = 0.78;

/** `words` words of the story, starting at word `offset` (wrapping around). */
export function storyWords(words: number, offset = 0): string {
  return Array.from({ length: words }, (_, index) => STORY[(offset + index) % STORY.length]).join(' ');
}

/** The `q` quantile (nearest rank) of `values`; NaN when empty. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));
