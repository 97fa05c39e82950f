// What the Batch API suites share (openai-batch on `--data-dir`, openai-batch-fleet on a broker): waiting for a batch
// to end, reading a result file's lines, and the parts of an answer a batch and an interactive request agree on.
import { pollUntil } from '@microbatch/test-kit';
import type OpenAI from 'openai';
import { expect } from 'vitest';

/** The statuses a batch ends in. */
const ENDED = new Set(['completed', 'failed', 'expired', 'cancelled']);

/**
 * Strings in code-unit order (a sort's comparator).
 *
 * @example
 * ```ts
 * ids.sort(byText);
 * ```
 */
export const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The batch `id` once it has ended, polled every 100 ms; still running after `limitMs` (a hang guard) fails the test.
 *
 * @example
 * ```ts
 * const done = await untilEnded(openai, batch.id);
 * ```
 */
export async function untilEnded(openai: OpenAI, id: string, limitMs = 120_000): Promise<OpenAI.Batch> {
  const { value, ok } = await pollUntil(
    () => openai.batches.retrieve(id),
    (b) => ENDED.has(b.status),
    limitMs,
    100,
  );
  expect(ok, `batch ${id} still ${value.status}`).toBe(true);
  return value;
}

/**
 * The JSON lines of file `id` (none when there is no file).
 *
 * @example
 * ```ts
 * const outputs = await contentLines(openai, done.output_file_id);
 * ```
 */
export async function contentLines(openai: OpenAI, id: string | null | undefined): Promise<Record<string, unknown>[]> {
  if (id === null || id === undefined) return [];
  const text = await (await openai.files.content(id)).text();
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/**
 * What must be equal between a batch answer and an interactive one: all but the id, time and cache counts.
 *
 * @example
 * ```ts
 * expect(comparable(batchBody)).toEqual(comparable(interactiveBody));
 * ```
 */
export function comparable(body: unknown): unknown {
  const { id: _id, created: _created, usage, ...rest } = body as Record<string, unknown>;
  const { prompt_tokens_details: _cached, ...counts } = (usage ?? {}) as Record<string, unknown>;
  return { ...rest, usage: counts };
}
