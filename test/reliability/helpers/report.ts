// Results of the reliability scenarios. Each test file records its scenarios; under `pnpm test:reliability`
// (test/reliability/vitest.config.ts) each file writes them to a folder its global setup provides, and the global
// teardown merges them into bench/results/reliability.json. Under plain `pnpm test` nothing is written.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where each test file writes its scenario results; only set by test/reliability/vitest.config.ts. */
    reliabilityResultsDir?: string;
  }
}

/** `pnpm test:reliability` sets RELIABILITY_FULL=1: the long overload and the thousands-client storm run. */
export const FULL = process.env.RELIABILITY_FULL === '1';

/** One scenario's figures. `requests_sent` counts only requests that must be answered (not deliberate aborts). */
export interface ScenarioResult {
  readonly scenario: string;
  readonly server:
    | 'express-text-completion'
    | 'koa-text-completion'
    | 'fastify-text-completion'
    | 'hono-text-completion'
    | 'nest-text-completion'
    | 'fault-server';
  readonly requests_sent: number;
  readonly answered_exactly_once: number;
  readonly lost: number;
  /** Server processes that died (or needed SIGKILL to stop) during the scenario. */
  readonly crashes: number;
  readonly bad_inputs_tried?: number;
  readonly bad_inputs_rejected_4xx?: number;
  readonly detail: Record<string, unknown>;
}

const results: ScenarioResult[] = [];

/** Keeps a scenario's figures for the report (record before asserting, so a failure is reported too). */
export function record(result: ScenarioResult): void {
  results.push(result);
}

/** Writes this file's scenarios where the reliability run collects them; a no-op under plain `pnpm test`. */
export async function flush(file: string): Promise<void> {
  const dir = inject('reliabilityResultsDir');
  if (dir === undefined || results.length === 0) return;
  await writeFile(join(dir, `${file}.json`), `${JSON.stringify(results, null, 2)}\n`);
}

/** Counts of a list, by key. */
export function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) {
    const name = key(item);
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

/** A list split by key, keys in first-seen order (Object.groupBy is Node 21+). */
export function groupBy<T>(items: readonly T[], key: (item: T) => string): Record<string, T[]> {
  const groups: Record<string, T[]> = {};
  for (const item of items) (groups[key(item)] ??= []).push(item);
  return groups;
}
