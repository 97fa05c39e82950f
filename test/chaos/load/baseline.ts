// The one right text of each prompt, computed before any fault by an uninterrupted run on the same fleet: each
// prompt alone, whole and streamed, then all of them at once (batched together). A prompt whose greedy text is not
// the same every way is dropped, so a later difference is the fleet's fault, never the model's batch numerics.
import type { Exchange } from '../checks/outcome.js';
import { sendCompletion } from './send-request.js';

/** A prompt and the greedy text every answer to it must be. */
export interface PromptCase {
  readonly prompt: string;
  readonly expected: string;
}

/** Prompts in the style of the bundled model's stories. */
export const PROMPTS: readonly string[] = [
  'Once upon a time',
  'The little dog',
  'Lily wanted to',
  'One day, a bird',
  'Tom and his mom went',
  'The sun was',
  'There was a big tree',
  'Sam found a red ball',
];

/** Fewer prompts than this left after the agreement check: the harness refuses to run. */
const MIN_PROMPTS = 3;

/** What {@link computeBaseline} needs. */
export interface BaselineOptions {
  /** Replica URLs (at least one); the passes go to each in turn. */
  readonly urls: readonly string[];
  readonly maxTokens: number;
  readonly giveUpMs: number;
  /** Told which prompts were dropped, and why. */
  readonly log: (line: string) => void;
}

/**
 * Runs every prompt alone (whole, then streamed) and all at once (each both ways), and keeps the prompts whose
 * answers all agree, with that text. Throws if any answer is not a complete 200, or if too few prompts agree.
 *
 * @example
 * ```ts
 * const cases = await computeBaseline({ urls: [a.url, b.url], maxTokens: 48, giveUpMs: 45_000, log: console.log });
 * ```
 */
export async function computeBaseline(options: BaselineOptions): Promise<PromptCase[]> {
  const { urls, maxTokens, giveUpMs } = options;
  if (urls.length === 0) throw new TypeError('Expected at least one replica URL for the baseline');
  const answers = new Map<string, string[]>(PROMPTS.map((prompt) => [prompt, []]));
  const take = (prompt: string, exchange: Exchange): void => {
    const complete = exchange.end === 'body' || exchange.end === 'done';
    if (exchange.status !== 200 || !complete) {
      throw new Error(`The baseline run failed for ${JSON.stringify(prompt)}: ${JSON.stringify(exchange)}`);
    }
    answers.get(prompt)?.push(exchange.text);
  };
  let turn = 0;
  const urlFor = (): string => urls[turn++ % urls.length] as string;
  for (const prompt of PROMPTS) {
    for (const stream of [false, true]) {
      take(prompt, await sendCompletion({ url: urlFor(), prompt, maxTokens, stream, giveUpMs }));
    }
  }
  const together = PROMPTS.flatMap((prompt) =>
    [false, true].map(async (stream) => {
      const exchange = await sendCompletion({ url: urlFor(), prompt, maxTokens, stream, giveUpMs });
      return { prompt, exchange };
    }),
  );
  for (const { prompt, exchange } of await Promise.all(together)) take(prompt, exchange);
  const cases: PromptCase[] = [];
  for (const [prompt, texts] of answers) {
    const distinct = new Set(texts);
    if (distinct.size === 1 && texts[0] !== '') cases.push({ prompt, expected: texts[0] as string });
    else
      options.log(
        `baseline: dropped ${JSON.stringify(prompt)}: its ${texts.length} answers were ${distinct.size} texts`,
      );
  }
  if (cases.length < MIN_PROMPTS) {
    throw new Error(`Only ${cases.length} prompts have one greedy text (at least ${MIN_PROMPTS} needed)`);
  }
  return cases;
}
