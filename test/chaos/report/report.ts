// A chaos run's report: the tables printed (faults, outcomes, violations with one example each) and the JSON summary
// written to bench/results/chaos-<broker>.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ALLOWED_OUTCOMES, VIOLATION_OUTCOMES } from '../checks/outcome.js';
import type { Verdict } from '../checks/verdict.js';
import { FAULT_KINDS, type FaultRecord } from '../faults/fault-loop.js';
import type { Leftovers } from '../fleet/broker.js';
import type { UnexpectedExit } from '../fleet/fleet.js';

const RESULTS = fileURLToPath(new URL('../../../bench/results/', import.meta.url));

/** Everything a run's summary holds besides the verdict. */
export interface RunFacts {
  readonly broker: string;
  readonly persistence: string;
  readonly seed: number;
  readonly minutes: number;
  readonly concurrency: number;
  readonly maxTokens: number;
  readonly deadlineMs: number;
  readonly slackMs: number;
  readonly claimIdleMs: number;
  readonly prompts: number;
  readonly startedAt: number;
  readonly faults: readonly FaultRecord[];
  readonly unexpectedExits: readonly UnexpectedExit[];
  readonly leftovers: Leftovers;
}

/**
 * Prints the run's tables through `print`.
 *
 * @example
 * ```ts
 * printReport(facts, verdict, console.log);
 * ```
 */
export function printReport(facts: RunFacts, verdict: Verdict, print: (line: string) => void): void {
  print(
    `\n== chaos on ${facts.broker} (seed ${facts.seed}, ${facts.minutes} min; broker persistence: ${facts.persistence})`,
  );
  const { sent, excluded, judged } = verdict.requests;
  print(`requests: ${sent} sent, ${excluded} excluded (their replica did not stay up), ${judged} judged`);
  print('');
  print(
    table(
      ['fault', 'injected', 'during', 'violations during', 'after', 'violations after'],
      FAULT_KINDS.map((kind) => {
        const tally = verdict.faults[kind];
        return [kind, tally.injected, tally.during, tally.duringViolations, tally.after, tally.afterViolations];
      }),
    ),
  );
  print('');
  const outcomes = [...ALLOWED_OUTCOMES, ...VIOLATION_OUTCOMES];
  print(
    table(
      ['outcome', 'kind', 'whole', 'streamed'],
      outcomes.map((outcome) => [
        outcome,
        (VIOLATION_OUTCOMES as readonly string[]).includes(outcome) ? 'VIOLATION' : 'allowed',
        verdict.outcomes.whole[outcome],
        verdict.outcomes.streamed[outcome],
      ]),
    ),
  );
  print('');
  print(`broker after the drain: ${facts.leftovers.detail}`);
  if (verdict.violations.length === 0) {
    print(`PASS: no violation on ${facts.broker}`);
    return;
  }
  print(
    table(
      ['violation', 'count'],
      verdict.violations.map((one) => [one.kind, one.count]),
    ),
  );
  for (const one of verdict.violations) print(`example of ${one.kind}: ${one.example}`);
  print(`FAIL: ${verdict.violations.reduce((sum, one) => sum + one.count, 0)} violations on ${facts.broker}`);
}

/**
 * Writes the run's JSON summary to `bench/results/chaos-<broker>.json`; returns its path.
 *
 * @example
 * ```ts
 * const path = writeSummary(facts, verdict);
 * ```
 */
export function writeSummary(facts: RunFacts, verdict: Verdict): string {
  mkdirSync(RESULTS, { recursive: true });
  const path = `${RESULTS}chaos-${facts.broker}.json`;
  const at = (time: number): number => time - facts.startedAt;
  const { faults, unexpectedExits, ...settings } = facts;
  const summary = {
    ...settings,
    startedAt: new Date(facts.startedAt).toISOString(),
    // Times in ms from the start of the load; `faults` (from the verdict) counts per kind, `faultLog` lists each.
    faultLog: faults.map((fault) => ({ ...fault, startedAt: at(fault.startedAt), recoveredAt: at(fault.recoveredAt) })),
    unexpectedExits: unexpectedExits.map((exit) => ({ ...exit, at: at(exit.at) })),
    ...verdict,
  };
  writeFileSync(path, `${JSON.stringify(summary, null, 2)}\n`);
  return path;
}

function table(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number>>): string {
  const cells = [header, ...rows].map((row) => row.map(String));
  const widths = header.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? '').length)));
  const line = (row: readonly string[]): string =>
    `| ${row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join(' | ')} |`;
  const rule = `|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`;
  return [line(cells[0] as string[]), rule, ...cells.slice(1).map(line)].join('\n');
}
