// A replica's view of the fleet's load, on its own: what it reads of the workers' heartbeats and the other
// replicas' published keys, and how it corrects a sample with what this replica did since.
import { describe, expect, it } from 'vitest';
import { FleetView, fleetKey, mergeLoads, parseWorkerSettings } from '@microbatch/transport';

const FIT = { samples: 7, msPerCost: 5, msPerBatch: 40, minMs: 45, spread: 0.1 };

describe('the fleet load a replica reads', () => {
  it("reads a worker's heartbeat: settings, a trusted fit, running batches; older or broken ones safely", () => {
    const text = JSON.stringify({
      maxBatchSize: 8,
      batchWaitTimeoutMs: 0,
      concurrency: 2,
      fit: FIT,
      running: [{ cost: 4, elapsedMs: 12.5 }, { cost: 'x' }],
      at: 1_000,
    });
    expect(parseWorkerSettings(text)).toEqual([
      {
        maxBatchSize: 8,
        batchWaitTimeoutMs: 0,
        concurrency: 2,
        fit: { ...FIT, flatCost: undefined },
        running: [{ cost: 4, elapsedMs: 12.5 }],
        at: 1_000,
      },
    ]);
    // A fit of fewer than 5 batches is not trusted; a worker of an older version has neither fit nor batches.
    const [young] = parseWorkerSettings(
      JSON.stringify({ maxBatchSize: 8, batchWaitTimeoutMs: 0, concurrency: 1, fit: { ...FIT, samples: 4 } }),
    );
    expect(young?.fit).toBeUndefined();
    expect(parseWorkerSettings(JSON.stringify({ maxBatchSize: 8, batchWaitTimeoutMs: 0, concurrency: 1 }))).toEqual([
      { maxBatchSize: 8, batchWaitTimeoutMs: 0, concurrency: 1, running: [] },
    ]);
    expect(parseWorkerSettings('{not json')).toEqual([]);
    expect(parseWorkerSettings('')).toEqual([]);
  });

  it("sums the other replicas' keys in flight, skipping what is malformed", () => {
    expect(mergeLoads(['{"a":2,"b":1}', '{"a":3}', 'nope', '{"c":"x","d":-1}', 'null'])).toEqual(
      new Map([
        ['a', 5],
        ['b', 1],
      ]),
    );
  });

  it('corrects the last sample with what this replica did since: its own waiting items and keys, exactly', () => {
    const view = new FleetView();
    view.count('client-1', 1);
    view.count('client-1', 1);
    view.count(undefined, 1); // no key: not counted per key
    expect(view.published()).toBe('{"client-1":2}');
    view.sampled({
      waiting: 10,
      ownWaiting: 2,
      workers: [{ maxBatchSize: 4, batchWaitTimeoutMs: 0, concurrency: 1, running: [{ cost: 4, elapsedMs: 5 }] }],
      others: new Map([
        ['client-1', 1],
        ['client-2', 4],
      ]),
      clockOffsetMs: 0,
    });
    // Since the sample this replica queued 3 more items (5 of its own waiting now), and one of client-1's ended.
    view.count('client-1', -1);
    const load = view.load(5);
    expect(load.waiting).toBe(13);
    expect(load.keys).toEqual(
      new Map([
        ['client-1', 2],
        ['client-2', 4],
      ]),
    );
    expect(load.workers[0]).toMatchObject({ maxBatchSize: 4, concurrency: 1, fit: undefined });
    // Its own items all ended: nothing of its own is published.
    view.count('client-1', -1);
    expect(view.published()).toBe('{}');
    expect(view.load(0).waiting).toBe(8);
  });

  it('brings a running batch up to now from the time the worker published (on Redis’s clock)', () => {
    const view = new FleetView();
    const redisNow = Date.now() + 5_000; // Redis's clock runs 5 s ahead of this one
    view.sampled({
      waiting: 0,
      ownWaiting: 0,
      workers: [
        {
          maxBatchSize: 4,
          batchWaitTimeoutMs: 0,
          concurrency: 1,
          running: [{ cost: 4, elapsedMs: 10 }],
          at: redisNow - 30,
        },
      ],
      others: new Map(),
      clockOffsetMs: 5_000,
    });
    const [batch] = view.load(0).workers[0]!.running;
    expect(batch!.elapsedMs).toBeGreaterThanOrEqual(40);
  });

  it('takes string and number fairness keys, and refuses one that cannot travel', () => {
    expect(fleetKey(undefined)).toBeUndefined();
    expect(fleetKey('10.0.0.1')).toBe('10.0.0.1');
    expect(fleetKey(7)).toBe('7');
    expect(() => fleetKey({ client: 1 })).toThrow(
      'Expected `fairnessKey` to be a string or a number on a shared queue (it travels across processes), got object',
    );
  });
});
