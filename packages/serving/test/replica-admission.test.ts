// A web replica's admission on its own, against a fleet load written by hand: what it predicts (core's completion
// rule over the workers' published fits), when it refuses, the fair share of a key, and how a refusal reaches
// callers of each batcher method.
import { BatchError, createBatcher, createStreamingBatcher } from '@microbatch/core';
import type { FleetLoad, FleetWorker, LatencyFit } from '@microbatch/core';
import { describe, expect, it } from 'vitest';
import { ReplicaAdmission } from '../src/service/replica-admission.js';

// 40 ms per batch plus 5 ms per item, exact (no spread): a batch of 4 takes 60 ms.
const FIT: LatencyFit = { samples: 10, msPerCost: 5, msPerBatch: 40, flatCost: undefined, minMs: 0, spread: 0 };

function worker(overrides: Partial<FleetWorker> = {}): FleetWorker {
  return { maxBatchSize: 4, concurrency: 1, fit: FIT, running: [], ...overrides };
}

describe('ReplicaAdmission', () => {
  it('admits everything until a worker has a trusted fit', () => {
    const load: FleetLoad = {
      waiting: 1_000,
      workers: [worker({ fit: { ...FIT, samples: 4 } })],
      keys: new Map(),
    };
    const admission = new ReplicaAdmission(10, () => load);
    expect(admission.predictMs()).toBeUndefined();
    expect(() => admission.admit(5)).not.toThrow();
  });

  it("predicts by core's completion rule over the fleet's waiting items and running batches", () => {
    let load: FleetLoad = { waiting: 7, workers: [worker()], keys: new Map() };
    const admission = new ReplicaAdmission(150, () => load);
    // 7 waiting + 1 = two batches of 4: 2 x 60 ms.
    expect(admission.predictMs()).toBe(120);
    expect(() => admission.admit()).not.toThrow();
    // 8 + 1 = three batches of 3: 3 x 55 ms.
    load = { ...load, waiting: 8 };
    expect(admission.predictMs()).toBe(165);
    expect(() => admission.admit()).toThrow(
      'The fleet is overloaded: the predicted wait of 165 ms exceeds maxLatencyMs (150 ms)',
    );
    // A group is admitted or refused whole: 7 + 2 items.
    load = { ...load, waiting: 7 };
    expect(() => admission.admit(2)).toThrow('the predicted wait of 165 ms');
    // A running batch of 4 that ran 20 of its 60 ms: 40 ms more before the queue's batches.
    load = { waiting: 7, workers: [worker({ running: [{ cost: 4, elapsedMs: 20 }] })], keys: new Map() };
    expect(admission.predictMs()).toBe(160);
    // Two slots (two workers) share the work: core's rule for several slots.
    load = { waiting: 15, workers: [worker(), worker()], keys: new Map() };
    expect(admission.predictMs()).toBe(150);
  });

  it('reads the prediction at the slow end of the band the fits stray by, as core does', () => {
    const load: FleetLoad = { waiting: 7, workers: [worker({ fit: { ...FIT, spread: 0.5 } })], keys: new Map() };
    const admission = new ReplicaAdmission(150, () => load);
    expect(admission.predictMs()).toBe(180);
    expect(() => admission.admit()).toThrow(BatchError);
  });

  it('admits an item that would start at once: nothing waiting and a slot free', () => {
    const load: FleetLoad = { waiting: 0, workers: [worker({ fit: { ...FIT, msPerBatch: 1_000 } })], keys: new Map() };
    expect(() => new ReplicaAdmission(150, () => load).admit()).not.toThrow();
  });

  it('refuses with the call’s own deadline when it is shorter', () => {
    const load: FleetLoad = { waiting: 7, workers: [worker()], keys: new Map() };
    const admission = new ReplicaAdmission(1_000, () => load);
    expect(() => admission.admit(1, { timeoutMs: 100 })).toThrow(
      expect.objectContaining({ code: 'OVERLOADED', details: { cause: 'deadline', predictedMs: 120, limitMs: 100 } }),
    );
  });

  it('shares the capacity within the limit among the keys in flight, keeping one share free', () => {
    // Idle, the fleet answers 8 items within 150 ms (two batches of 4); 9 would take 165 ms.
    let load: FleetLoad = { waiting: 2, workers: [worker()], keys: new Map([['heavy', 4]]) };
    const admission = new ReplicaAdmission(150, () => load);
    expect(admission.capacityItems()).toBe(8);
    // Alone, a key holds half: the other half is kept for a client that is not there yet.
    expect(() => admission.admit(1, { fairnessKey: 'heavy' })).toThrow(
      expect.objectContaining({ code: 'OVERLOADED', details: { cause: 'fair-share', queued: 4, share: 4 } }),
    );
    expect(() => admission.admit(1, { fairnessKey: 'light' })).not.toThrow();
    // With two keys in flight, each holds a third.
    load = {
      ...load,
      keys: new Map([
        ['heavy', 2],
        ['light', 2],
      ]),
    };
    expect(() => admission.admit(1, { fairnessKey: 'light' })).toThrow('share 2');
    expect(() => admission.admit(1, { fairnessKey: 'newcomer' })).not.toThrow();
  });

  it('refuses through the guarded batcher as a rejected call, or at a stream’s first next()', async () => {
    const load: FleetLoad = { waiting: 100, workers: [worker()], keys: new Map() };
    const admission = new ReplicaAdmission(150, () => load);
    const batcher = createBatcher(async (inputs: number[]) => inputs.map((input) => input * 2));
    const streamer = createStreamingBatcher(async function* (inputs: number[]) {
      yield inputs;
    });
    const guarded = admission.guard(batcher);
    const guardedStreamer = admission.guard(streamer);
    await expect(guarded.call(1)).rejects.toMatchObject({ code: 'OVERLOADED', retryAfterSeconds: 2 });
    await expect(guarded(1)).rejects.toMatchObject({ code: 'OVERLOADED' });
    await expect(guarded.callAll([1, 2])).rejects.toMatchObject({ code: 'OVERLOADED' });
    await expect(guardedStreamer.stream(1).next()).rejects.toMatchObject({ code: 'OVERLOADED' });
    const [first] = guardedStreamer.streamAll([1, 2]);
    await expect(first!.next()).rejects.toMatchObject({ code: 'OVERLOADED' });
    const idle: FleetLoad = { waiting: 0, workers: [worker()], keys: new Map() };
    const open = new ReplicaAdmission(150, () => idle).guard(batcher);
    expect(await open(21)).toBe(42);
    // Everything else is the batcher's own.
    expect(guarded.name).toBe(batcher.name);
    expect(guarded.stats().batchesProcessed).toBe(batcher.stats().batchesProcessed);
  });

  it('reports its refusals as the batcher’s: stats, the reject event, the limit and the prediction', async () => {
    const load: FleetLoad = { waiting: 100, workers: [worker()], keys: new Map() };
    const admission = new ReplicaAdmission(150, () => load);
    const batcher = createBatcher(async (inputs: number[]) => inputs);
    const guarded = admission.guard(batcher);
    const heard: unknown[] = [];
    const off = guarded.on('reject', (payload) => heard.push(payload));
    await expect(guarded.callAll([1, 2])).rejects.toMatchObject({ code: 'OVERLOADED' });
    expect(heard).toEqual([
      expect.objectContaining({ reason: 'OVERLOADED', cause: 'latency' }),
      expect.objectContaining({ reason: 'OVERLOADED', cause: 'latency' }),
    ]);
    off();
    await expect(guarded(3)).rejects.toMatchObject({ code: 'OVERLOADED' });
    expect(heard).toHaveLength(2);
    const stats = guarded.stats();
    expect(stats.rejected.OVERLOADED).toBe(3);
    expect(stats.overloaded).toEqual({ latency: 3, deadline: 0, 'fair-share': 0 });
    expect(stats.maxLatencyMs).toBe(150);
    expect(stats.estimate).toEqual({ ready: true, samples: 10, msPerCost: 5, msPerBatch: 40 });
    expect(stats.predictedLatencyMs).toBe(admission.predictMs());
    expect(batcher.stats().rejected.OVERLOADED).toBe(0);
  });
});
