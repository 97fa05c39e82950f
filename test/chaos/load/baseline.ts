// The one right text of each prompt, computed before any fault by an uninterrupted run on the same fleet: each
// prompt alone, whole and streamed, then all of them at once (batched together). A prompt whose greedy text is not
// the same every way is dropped, so a later difference is the fleet's fault, never the model's batch numerics.
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

/** How many times the baseline asks one question before it gives up on the fleet. */
const BASELINE_ATTEMPTS = 5;
/** The pause before asking again: a replica's 503 says `Retry-After: 1`. */
const BASELINE_RETRY_PAUSE_MS = 1_000;

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
 * answers all agree, with that text. A question answered otherwise than by a complete 200 is asked again (up to 5
 * times); throws if one never is, or if too few prompts agree.
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
  let turn = 0;
  // One complete 200 per question: a refusal (a 503 while a starved worker's heartbeat is late) is asked again, since
  // the baseline learns texts and judges nothing; a fleet that never answers is an error.
  const ask = async (prompt: string, stream: boolean): Promise<void> => {
    for (let attempt = 1; ; attempt += 1) {
      const url = urls[turn++ % urls.length] as string;
      const exchange = await sendCompletion({ url, prompt, maxTokens, stream, giveUpMs });
      if (exchange.status === 200 && (exchange.end === 'body' || exchange.end === 'done')) {
        answers.get(prompt)?.push(exchange.text);
        return;
      }
      if (attempt === BASELINE_ATTEMPTS) {
        throw new Error(`The baseline run failed for ${JSON.stringify(prompt)}: ${JSON.stringify(exchange)}`);
      }
      options.log(
        `baseline: ${JSON.stringify(prompt)} asked again after ${exchange.status} ${exchange.end}: ` +
          JSON.stringify(exchange).slice(-400),
      );
      await new Promise((resolve) => setTimeout(resolve, BASELINE_RETRY_PAUSE_MS));
    }
  };
  for (const prompt of PROMPTS) {
    for (const stream of [false, true]) await ask(prompt, stream);
  }
  await Promise.all(PROMPTS.flatMap((prompt) => [false, true].map((stream) => ask(prompt, stream))));
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
