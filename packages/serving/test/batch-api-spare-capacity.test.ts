// The Batch API's spare-capacity gate on fake batchers and a hand-driven clock: a line is fed only once no
// interactive request has run or waited for the quiet period, a slot is free and fewer than maxInFlight lines run;
// an interactive arrival (a batch started, or an item queued, seen at the next poll) preempts every held line;
// feeding resumes once idle, one line at first, one more per line finished.
import type { BatcherBase, BatcherEvents } from '@microbatch/core';
import { describe, expect, it } from 'vitest';
import { defaultMaxInFlight } from '../src/batch-api/batch-api.js';
import { SpareCapacity } from '../src/batch-api/spare-capacity.js';

/** A batcher's counters, set by the test, and its `batchStart` listeners, fired by the test. */
function fakeBatcher(slots: number) {
  const listeners = new Set<(payload: BatcherEvents['batchStart']) => void>();
  const batcher = {
    queueLength: 0,
    inFlightBatches: 0,
    maxConcurrentBatches: slots,
    on: (event: string, listener: (payload: BatcherEvents['batchStart']) => void) => {
      if (event !== 'batchStart') throw new Error(`unexpected event ${event}`);
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  const start = () => {
    batcher.inFlightBatches += 1;
    for (const listener of listeners)
      listener({ batchId: 1, batchSize: 1, maxBatchSize: 1, key: 0, queueTimesMs: [0] });
  };
  return { batcher, listeners, start, asBase: batcher as unknown as BatcherBase };
}

/** Time moves and timers run only when the test says so. */
function manualClock() {
  const timers = new Map<number, () => void>();
  let next = 0;
  let now = 1000;
  return {
    advance: (ms: number) => {
      now += ms;
    },
    clock: {
      now: () => now,
      setTimeout: (callback: () => void) => {
        timers.set(++next, callback);
        return next;
      },
      clearTimeout: (handle: unknown) => {
        timers.delete(handle as number);
      },
    },
    pending: () => timers.size,
    /** Runs the timers due now (those they set run at the next tick). */
    tick: () => {
      const due = [...timers.entries()];
      timers.clear();
      for (const [, callback] of due) callback();
    },
  };
}

/** A gate over one fake batcher, the batch lines' items counted by the test. */
function gateOf(slots: number, maxInFlight: number | (() => number)) {
  const fake = fakeBatcher(slots);
  const time = manualClock();
  let batchItems = 0;
  const gate = new SpareCapacity({
    batchers: [fake.asBase],
    batchItemsInFlight: () => batchItems,
    maxInFlight,
    quietMs: 50,
    clock: time.clock,
  });
  /** A batch line dispatched: its item counted before its batch starts, as `lowPriorityService` counts it. */
  const startLine = () => {
    batchItems += 1;
    fake.start();
    return gate.hold();
  };
  const endLine = (lease: { release(): void }) => {
    batchItems -= 1;
    fake.batcher.inFlightBatches -= 1;
    lease.release();
  };
  return { gate, fake, time, startLine, endLine };
}

const microtasks = () => new Promise<void>((resolve) => queueMicrotask(resolve));

describe('SpareCapacity', () => {
  it('feeds up to maxInFlight lines on an idle server, and none once the slots are full', () => {
    const { gate, startLine } = gateOf(3, 2);
    expect(gate.mayFeed(0)).toBe(true);
    startLine();
    expect(gate.mayFeed(1)).toBe(true);
    startLine();
    expect(gate.mayFeed(2)).toBe(false);
    // Fewer slots than maxInFlight: a full batcher stops feeding too.
    const small = gateOf(1, 4);
    small.startLine();
    expect(small.gate.mayFeed(1)).toBe(false);
  });

  it('reads a maxInFlight function at each decision (a queue learns its slots from its workers later)', () => {
    let limit = 1;
    const { gate, fake, startLine } = gateOf(40, () => limit);
    expect(gate.mayFeed(0)).toBe(true);
    startLine();
    expect(gate.mayFeed(1)).toBe(false);
    limit = 3;
    expect(gate.maxInFlight).toBe(3);
    expect(gate.mayFeed(1)).toBe(true);
    startLine();
    startLine();
    expect(gate.mayFeed(3)).toBe(false);
    expect(fake.batcher.inFlightBatches).toBe(3);
  });

  it('an interactive request dispatched at once preempts every held line as its batch starts, and nothing is fed beside it', async () => {
    const { gate, fake, time, startLine, endLine } = gateOf(8, 4);
    const leases = [startLine(), startLine()];
    expect(gate.interactive()).toBe(false);
    fake.start(); // the interactive request: a batch with no batch item counted
    expect(gate.interactive()).toBe(true);
    // Checked after the dispatch, not inside its event.
    expect(leases.map((lease) => lease.signal.aborted)).toEqual([false, false]);
    await microtasks();
    expect(leases.map((lease) => lease.signal.aborted)).toEqual([true, true]);
    expect(leases[0]?.signal.reason).toMatchObject({ name: 'AbortError' });
    expect(gate.preempted).toBe(2);
    // The preempted lines leave (the decode loop drops them); the interactive one runs alone.
    for (const lease of leases) endLine(lease);
    expect(gate.mayFeed(0)).toBe(false);
    // It ends: feeding resumes once the server has been idle for the quiet period.
    fake.batcher.inFlightBatches -= 1;
    expect(gate.mayFeed(0)).toBe(false);
    time.advance(49);
    expect(gate.mayFeed(0)).toBe(false);
    time.advance(1);
    expect(gate.mayFeed(0)).toBe(true);
  });

  it('after a preemption, feeds one line, then one more per line that finishes unpreempted, up to maxInFlight', async () => {
    const { gate, fake, time, startLine, endLine } = gateOf(16, 3);
    const first = [startLine(), startLine(), startLine()];
    expect(gate.window).toBe(3);
    fake.start();
    await microtasks();
    expect(gate.window).toBe(1);
    for (const lease of first) endLine(lease); // preempted: their ends widen nothing
    fake.batcher.inFlightBatches -= 1;
    time.advance(50);
    expect(gate.window).toBe(1);
    expect(gate.mayFeed(0)).toBe(true);
    const one = startLine();
    expect(gate.mayFeed(1)).toBe(false);
    endLine(one);
    expect(gate.window).toBe(2);
    const two = [startLine(), startLine()];
    expect(gate.mayFeed(2)).toBe(false);
    for (const lease of two) endLine(lease);
    expect(gate.window).toBe(3);
    endLine(startLine());
    expect(gate.window).toBe(3);
  });

  it('an interactive request that starts while no line runs restarts the quiet period', async () => {
    const { gate, fake, time } = gateOf(8, 4);
    expect(gate.mayFeed(0)).toBe(true);
    fake.start();
    await microtasks();
    fake.batcher.inFlightBatches -= 1; // ended before any poll of the feeder
    expect(gate.mayFeed(0)).toBe(false);
    time.advance(50);
    expect(gate.mayFeed(0)).toBe(true);
    expect(gate.preempted).toBe(0);
  });

  it('an interactive request queued behind full slots is seen at the next poll, and preempts the held lines', () => {
    const { gate, fake, time, startLine } = gateOf(2, 2);
    const leases = [startLine(), startLine()];
    fake.batcher.queueLength = 1;
    expect(leases.some((lease) => lease.signal.aborted)).toBe(false);
    expect(time.pending()).toBe(1);
    time.tick();
    expect(leases.every((lease) => lease.signal.aborted)).toBe(true);
    expect(gate.preempted).toBe(2);
    // Nothing held: the polls stop.
    expect(time.pending()).toBe(0);
  });

  it('a line that ended before the interactive arrival is not preempted, and polls stop once no line is held', () => {
    const { gate, fake, time, startLine, endLine } = gateOf(4, 2);
    const done = startLine();
    const running = startLine();
    endLine(done);
    time.tick();
    expect(time.pending()).toBe(1);
    fake.batcher.queueLength = 1;
    time.tick();
    expect(done.signal.aborted).toBe(false);
    expect(running.signal.aborted).toBe(true);
    expect(gate.preempted).toBe(1);
    expect(time.pending()).toBe(0);
  });

  it("a line's own batch start never preempts it: batch items are counted before their batch starts", async () => {
    const { gate, time, startLine } = gateOf(4, 2);
    const leases = [startLine(), startLine()];
    await microtasks();
    time.tick();
    expect(leases.some((lease) => lease.signal.aborted)).toBe(false);
    expect(gate.preempted).toBe(0);
  });

  it('close() stops watching: no listener, no timer', () => {
    const { gate, fake, time, startLine } = gateOf(4, 2);
    startLine();
    expect(fake.listeners.size).toBe(1);
    gate.close();
    expect(fake.listeners.size).toBe(0);
    expect(time.pending()).toBe(0);
    gate.hold();
    expect(time.pending()).toBe(0);
  });

  it('refuses a maxInFlight or pollMs that is not usable, naming it', () => {
    const batchers: BatcherBase[] = [];
    const base = { batchers, batchItemsInFlight: () => 0 };
    expect(() => new SpareCapacity({ ...base, maxInFlight: 0 })).toThrow(
      new TypeError('maxInFlight must be a positive integer or a function, got 0'),
    );
    expect(() => new SpareCapacity({ ...base, maxInFlight: 1, pollMs: 0 })).toThrow(
      new TypeError('pollMs must be a positive number of milliseconds, got 0'),
    );
    expect(() => new SpareCapacity({ ...base, maxInFlight: 1, quietMs: -1 })).toThrow(
      new TypeError('quietMs must be a number of milliseconds (0 or more), got -1'),
    );
  });

  it('defaults maxInFlight to the slots less an eighth (a free slot for an interactive arrival), at least 1', () => {
    expect(defaultMaxInFlight(36)).toBe(31);
    expect(defaultMaxInFlight(8)).toBe(7);
    expect(defaultMaxInFlight(1)).toBe(1);
    expect(defaultMaxInFlight(Number.POSITIVE_INFINITY)).toBe(8);
  });
});
