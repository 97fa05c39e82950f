// The grace a replica gives its waiting items when no worker is alive, on an injected clock: each sample of the
// fleet is one `observe`, and the items fail only once the grace has passed with no worker, never before.
import {
  type QueueStatus,
  FleetView,
  QueueBatcher,
  WaiterRegistry,
  WorkerGrace,
  unavailable,
} from '@microbatch/transport';
import { ManualClock } from '@microbatch/test-kit';
import { describe, expect, it } from 'vitest';

function setup(graceMs: number) {
  const clock = new ManualClock();
  const statuses: QueueStatus[] = [];
  const deleted: string[] = [];
  const waiters = new WaiterRegistry(new FleetView(), (entryId) => deleted.push(entryId));
  const owner = new QueueBatcher('double', false, {
    brokerName: 'Test',
    workerFactory: 'createTestWorker',
    snapshot: { waiting: 0, running: 0, workersAlive: 0, workerSettings: [], sampledAt: 0 },
    submit: () => undefined,
    closeBatcher: async () => undefined,
  });
  const outcomes: unknown[] = [];
  /** An item whose entry the broker holds (`entryId`), or one still being added (none). */
  const wait = (entryId: string | undefined): void => {
    const index = outcomes.push('waiting') - 1;
    const waiter = waiters.register(
      owner,
      { input: 1, channel: undefined, signal: undefined, settle: (error) => (outcomes[index] = error ?? 'answered') },
      {},
      Number.POSITIVE_INFINITY,
      undefined,
      { field: '', sent: undefined },
    );
    waiter.entryId = entryId;
  };
  const grace = new WorkerGrace({
    graceMs,
    queue: 'q',
    onStatus: (status) => statuses.push(status),
    waiters,
    noWorker: () => unavailable('No worker', 1),
    now: () => clock.now(),
  });
  return { clock, statuses, deleted, outcomes, wait, grace };
}

describe('WorkerGrace', () => {
  it('keeps the waiting items through the grace and serves them if a worker comes back within it', async () => {
    const { clock, statuses, outcomes, wait, grace } = setup(5_000);
    grace.observe(1);
    wait('1-0');
    grace.observe(0);
    await clock.advance(4_999);
    grace.observe(0);
    expect([outcomes, grace.inGrace]).toEqual([['waiting'], true]);
    grace.observe(2); // a replacement, 1 ms before the grace runs out
    await clock.advance(10_000);
    grace.observe(2);
    expect(outcomes).toEqual(['waiting']);
    expect(statuses).toEqual([
      { event: 'workers-up', queue: 'q', workers: 1 },
      { event: 'workers-down', queue: 'q', failed: 0 },
      { event: 'workers-up', queue: 'q', workers: 2 },
    ]);
  });

  it('fails the items waiting (their entries deleted) once the grace ran out with no worker, and says so once', async () => {
    const { clock, statuses, deleted, outcomes, wait, grace } = setup(5_000);
    grace.observe(1);
    wait('1-0');
    wait('2-0');
    wait(undefined); // still being added: the broker's own verdict (no live worker) settles it
    grace.observe(0);
    await clock.advance(5_000);
    grace.observe(0);
    expect(outcomes.slice(0, 2)).toEqual([
      expect.objectContaining({ code: 'UNAVAILABLE', message: 'No worker' }),
      expect.objectContaining({ code: 'UNAVAILABLE', message: 'No worker' }),
    ]);
    expect([outcomes[2], deleted, grace.inGrace]).toEqual(['waiting', ['1-0', '2-0'], false]);
    await clock.advance(60_000);
    grace.observe(0);
    expect(statuses.map((status) => status.event)).toEqual(['workers-up', 'workers-down', 'workers-gone']);
    expect(statuses[2]).toEqual({ event: 'workers-gone', queue: 'q', failed: 2, graceMs: 5_000 });
  });

  it('without a grace (0) fails them as soon as the last worker is gone, in the one report', () => {
    const { statuses, outcomes, wait, grace } = setup(0);
    grace.observe(0); // the first state seen: none yet, nothing waiting
    grace.observe(1);
    wait('1-0');
    grace.observe(0);
    expect(outcomes).toEqual([expect.objectContaining({ code: 'UNAVAILABLE' })]);
    expect(statuses).toEqual([
      { event: 'workers-down', queue: 'q', failed: 0 },
      { event: 'workers-up', queue: 'q', workers: 1 },
      { event: 'workers-down', queue: 'q', failed: 1 },
    ]);
  });
});
