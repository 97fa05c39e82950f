// The pass criteria of a chaos run, checked on what it recorded: each request judged (those of a replica that did not
// stay up excluded), counted per outcome and per fault; exits nobody asked for; "Unhandled" in any process's output;
// request entries the broker still holds once everything drained. Every violation is counted with one example.
import type { FaultKind, FaultRecord } from '../faults/fault-loop.js';
import { FAULT_KINDS } from '../faults/fault-loop.js';
import type { Leftovers } from '../fleet/broker.js';
import type { Incarnation, UnexpectedExit } from '../fleet/fleet.js';
import type { PromptCase } from '../load/baseline.js';
import type { RequestRecord } from '../load/load-generator.js';
import { ALLOWED_OUTCOMES, type Outcome, VIOLATION_OUTCOMES, isViolation, outcomeOf } from './outcome.js';

/**
 * A replica's exit is noticed by the harness through its `exit` event, which can come after its clients saw their
 * connections close: a request that ended this shortly before the notice is counted as the replica's, not judged.
 */
const EXIT_NOTICE_MS = 1_000;

/** Requests during and after one kind of fault. */
export interface FaultTally {
  injected: number;
  /** Judged requests whose lifetime overlapped a fault of this kind (from injection to recovery). */
  during: number;
  duringViolations: number;
  /** Judged requests started after a recovery, before the next fault. */
  after: number;
  afterViolations: number;
}

/** One kind of violation: how many, and one example. */
export interface ViolationTally {
  readonly kind: string;
  readonly count: number;
  readonly example: string;
}

/** What the checks found. */
export interface Verdict {
  readonly requests: { readonly sent: number; readonly excluded: number; readonly judged: number };
  readonly outcomes: Record<'whole' | 'streamed', Record<Outcome, number>>;
  readonly faults: Record<FaultKind, FaultTally>;
  readonly violations: ViolationTally[];
  readonly passed: boolean;
}

/** What the run recorded. */
export interface RunRecord {
  readonly cases: readonly PromptCase[];
  readonly records: readonly RequestRecord[];
  readonly faults: readonly FaultRecord[];
  readonly incarnations: readonly Incarnation[];
  readonly unexpectedExits: readonly UnexpectedExit[];
  /** What the broker held after the drain, and whether that was nothing. */
  readonly leftovers: Leftovers;
  /** When the load stopped: the last fault's "after" window ends here. */
  readonly loadEndedAt: number;
}

/**
 * Checks a run against the pass criteria.
 *
 * @example
 * ```ts
 * const verdict = judge(run);
 * if (!verdict.passed) process.exitCode = 1;
 * ```
 */
export function judge(run: RunRecord): Verdict {
  const examples = new Map<string, { count: number; example: string }>();
  const violate = (kind: string, example: string): void => {
    const seen = examples.get(kind);
    if (seen === undefined) examples.set(kind, { count: 1, example });
    else seen.count += 1;
  };
  const outcomes = { whole: emptyOutcomes(), streamed: emptyOutcomes() };
  const faults = Object.fromEntries(
    FAULT_KINDS.map((kind) => [kind, { injected: 0, during: 0, duringViolations: 0, after: 0, afterViolations: 0 }]),
  ) as Record<FaultKind, FaultTally>;
  for (const fault of run.faults) faults[fault.kind].injected += 1;
  const byId = new Map(run.incarnations.map((one) => [one.id, one]));
  let excluded = 0;
  for (const record of run.records) {
    const replica = byId.get(record.replica);
    const downAt = replica?.downAt;
    // The fault loop marks a replica down before its SIGKILL; only an exit of its own is noticed late.
    const notice = replica?.expectedExit === true ? 0 : EXIT_NOTICE_MS;
    if (downAt !== undefined && downAt <= record.endedAt + notice) {
      excluded += 1; // its replica did not stay up for the request's whole lifetime
      continue;
    }
    const expected = (run.cases[record.promptIndex] as PromptCase).expected;
    const outcome = outcomeOf(record.exchange, expected);
    outcomes[record.streamed ? 'streamed' : 'whole'][outcome] += 1;
    const bad = isViolation(outcome);
    if (bad) violate(outcome, describeRequest(record, expected));
    tallyFaults(run, record, bad, faults);
  }
  for (const exit of run.unexpectedExits) {
    violate('unexpected-exit', `${exit.id} exited (code ${exit.code}, signal ${exit.signal}): ${crashOf(exit.tail)}`);
  }
  for (const one of run.incarnations) {
    const line = one.handle
      .output()
      .split('\n')
      .find((text) => text.includes('Unhandled'));
    if (line !== undefined) violate('unhandled', `${one.id}: ${line.slice(0, 600)}`);
  }
  if (run.leftovers.entries !== 0 || run.leftovers.pending !== 0) violate('orphaned-entries', run.leftovers.detail);
  const violations = [...examples].map(([kind, { count, example }]) => ({ kind, count, example }));
  const judged = run.records.length - excluded;
  return {
    requests: { sent: run.records.length, excluded, judged },
    outcomes,
    faults,
    violations,
    passed: violations.length === 0 && judged > 0,
  };
}

function emptyOutcomes(): Record<Outcome, number> {
  return Object.fromEntries([...ALLOWED_OUTCOMES, ...VIOLATION_OUTCOMES].map((name) => [name, 0])) as Record<
    Outcome,
    number
  >;
}

function tallyFaults(run: RunRecord, record: RequestRecord, bad: boolean, faults: Record<FaultKind, FaultTally>): void {
  run.faults.forEach((fault, index) => {
    const tally = faults[fault.kind];
    if (record.startedAt <= fault.recoveredAt && record.endedAt >= fault.startedAt) {
      tally.during += 1;
      if (bad) tally.duringViolations += 1;
      return;
    }
    const windowEnd = run.faults[index + 1]?.startedAt ?? run.loadEndedAt;
    if (record.startedAt > fault.recoveredAt && record.startedAt < windowEnd) {
      tally.after += 1;
      if (bad) tally.afterViolations += 1;
    }
  });
}

/** The lines of a crash worth quoting: its last log line and the first error line after it (not a native stack). */
function crashOf(tail: string): string {
  const lines = tail.split('\n').filter((line) => line.trim() !== '');
  const lastLog = lines.findLastIndex((line) => line.startsWith('{'));
  const error = lines
    .slice(lastLog + 1)
    .find((line) => /^\w*(Error|Exception)\b|Unhandled|terminate called/.test(line));
  return [lines[lastLog], error ?? lines.at(-1)]
    .filter((line) => line !== undefined)
    .join(' … ')
    .slice(0, 800);
}

function describeRequest(record: RequestRecord, expected: string): string {
  const { exchange } = record;
  const mode = record.streamed ? 'streamed' : 'whole';
  const took = record.endedAt - record.startedAt;
  return (
    `#${record.seq} ${mode} to ${record.replica}, ${took} ms, status ${exchange.status ?? '-'}, end ${exchange.end}` +
    `${exchange.detail === undefined ? '' : ` (${exchange.detail})`}; expected ${JSON.stringify(expected)}, ` +
    `received ${JSON.stringify(exchange.text)}`
  );
}
