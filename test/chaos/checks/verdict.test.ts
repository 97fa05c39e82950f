// The chaos run's verdict on a recorded run, on its own: which requests are judged (a replica the loop killed does
// not count against the fleet), how they are counted per fault, and the process and broker checks. No processes.
import type { ChildHandle } from '@microbatch/test-kit';
import { describe, expect, it } from 'vitest';
import type { FaultRecord } from '../faults/fault-loop.js';
import type { Incarnation } from '../fleet/fleet.js';
import type { RequestRecord } from '../load/load-generator.js';
import type { Exchange } from './outcome.js';
import { type RunRecord, judge } from './verdict.js';

const EXPECTED = 'Once upon a time, there was a cat.';

function incarnation(id: string, fields: Partial<Incarnation> = {}, output = ''): Incarnation {
  const handle = { output: () => output } as unknown as ChildHandle;
  const [member = id] = id.split('#');
  return {
    id,
    member,
    role: 'replica',
    handle,
    url: 'http://127.0.0.1:1',
    startedAt: 0,
    downAt: undefined,
    expectedExit: false,
    ...fields,
  };
}

function request(
  seq: number,
  replica: string,
  startedAt: number,
  endedAt: number,
  exchange: Partial<Exchange>,
): RequestRecord {
  return {
    seq,
    replica,
    promptIndex: 0,
    streamed: true,
    startedAt,
    endedAt,
    exchange: {
      status: 200,
      streamed: true,
      end: 'done',
      text: EXPECTED,
      errorCode: undefined,
      eventsAfterEnd: 0,
      detail: undefined,
      ...exchange,
    },
  };
}

const kill: FaultRecord = { kind: 'kill-replica', target: 'replica-a#1', startedAt: 100, recoveredAt: 200, detail: '' };

function run(fields: Partial<RunRecord>): RunRecord {
  return {
    cases: [{ prompt: 'Once upon a time', expected: EXPECTED }],
    records: [],
    faults: [],
    incarnations: [incarnation('replica-a#1'), incarnation('replica-b#1')],
    unexpectedExits: [],
    leftovers: { entries: 0, pending: 0, detail: 'XLEN = 0' },
    loadEndedAt: 1_000,
    ...fields,
  };
}

describe('judge', () => {
  it('excludes the requests of a replica the loop killed before they ended, and judges the others', () => {
    const verdict = judge(
      run({
        faults: [kill],
        incarnations: [incarnation('replica-a#1', { downAt: 100, expectedExit: true }), incarnation('replica-b#1')],
        records: [
          request(0, 'replica-a#1', 90, 101, { end: 'reset', status: undefined, text: '' }), // killed under it
          request(1, 'replica-a#1', 10, 50, {}), // ended before the kill: judged
          request(2, 'replica-b#1', 150, 180, { status: 503, end: 'body', text: '', errorCode: 'UNAVAILABLE' }),
          request(3, 'replica-b#1', 300, 320, { text: EXPECTED + EXPECTED }), // after the recovery: a doubled stream
        ],
      }),
    );
    expect(verdict.requests).toEqual({ sent: 4, excluded: 1, judged: 3 });
    expect(verdict.outcomes.streamed).toMatchObject({ ok: 1, refused: 1, repeated: 1, reset: 0 });
    expect(verdict.faults['kill-replica']).toEqual({
      injected: 1,
      during: 1,
      duringViolations: 0,
      after: 1,
      afterViolations: 1,
    });
    expect(verdict.violations.map((one) => [one.kind, one.count])).toEqual([['repeated', 1]]);
    expect(verdict.violations[0]?.example).toContain('#3 streamed to replica-b#1');
    expect(verdict.passed).toBe(false);
  });

  it('fails on an exit nobody asked for, on "Unhandled" in any output, and on entries left in the broker', () => {
    const verdict = judge(
      run({
        records: [request(0, 'replica-b#1', 0, 10, {})],
        incarnations: [incarnation('replica-a#1'), incarnation('worker-1#1', {}, 'Unhandled rejection: boom\n')],
        unexpectedExits: [
          {
            id: 'worker-2#1',
            at: 5,
            code: 1,
            signal: null,
            tail: '{"msg":"batch"}\n{"msg":"broker down"}\nnode:internal/process/promises:391\n    triggerUncaughtException(err, true);\n\nError: read ECONNRESET\n    at TCP.onStreamRead\n',
          },
        ],
        leftovers: { entries: 2, pending: 1, detail: 'XLEN = 2, XPENDING = 1' },
      }),
    );
    expect(verdict.violations.map((one) => [one.kind, one.count])).toEqual([
      ['unexpected-exit', 1],
      ['unhandled', 1],
      ['orphaned-entries', 1],
    ]);
    // The example quotes the crash's last log line and its error, not the stack.
    expect(verdict.violations[0]?.example).toBe(
      'worker-2#1 exited (code 1, signal null): {"msg":"broker down"} … Error: read ECONNRESET',
    );
    expect(verdict.passed).toBe(false);
  });

  it('passes a run whose every judged request had an allowed outcome, and never one that judged nothing', () => {
    expect(judge(run({ records: [request(0, 'replica-a#1', 0, 10, {})] })).passed).toBe(true);
    expect(judge(run({})).passed).toBe(false);
  });
});
