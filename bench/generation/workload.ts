// The mixed text-generation workload of `pnpm bench:generation`: prompts of different lengths and max_tokens drawn
// from 8 to 128, in a fixed pseudo-random order, so every scheduling and concurrency gets the same requests.
import { seededRandom } from '@microbatch/core/util';
import type { TextGenerationInput } from '@microbatch/inference';

const STORY =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. ' +
  'One day, Lily saw a big red ball under a tree. She wanted to play with it, but it was too high. ' +
  'Lily asked her mom for help. Her mom smiled and said, "Let us get it together." They found a long stick and ' +
  'pushed the ball down. Lily was very happy and played with the ball all day. When the sun went down, she went ' +
  'home and told her dad about the ball. Her dad hugged her and said she was a good girl. The next day, Lily took ' +
  'the ball to the park again and shared it with her friends. They all laughed and ran in the warm sun. ';

const WORDS = STORY.split(' ');
/** Prompt lengths in words: from about 5 to about 65 tokens. */
const PROMPT_WORDS = [3, 6, 12, 24, 48];
export const MAX_TOKENS_CLASSES = [8, 16, 32, 64, 128] as const;

/** `count` greedy requests with mixed prompt lengths and max_tokens. */
export function mixedWorkload(count: number, seed = 12): TextGenerationInput[] {
  const next = seededRandom(seed);
  return Array.from({ length: count }, () => {
    const words = PROMPT_WORDS[Math.floor(next() * PROMPT_WORDS.length)] as number;
    const start = Math.floor(next() * 20);
    const prompt = `${WORDS.slice(start, start + words).join(' ')} `;
    const max = MAX_TOKENS_CLASSES[Math.floor(next() * MAX_TOKENS_CLASSES.length)] as number;
    return { prompt, max_new_tokens: max, temperature: 0, stop: [] };
  });
}
