// A web replica's latency-aware admission on its own, with an injected clock: what it predicts, when it refuses,
// and how a refusal reaches callers of each batcher method.
import { BatchError, createBatcher, createStreamingBatcher } from '@microbatch/core';
import { ManualClock } from '@microbatch/test-kit';
import { describe, expect, it } from 'vitest';
import { ReplicaAdmission } from '../src/replica-admission.js';

describe('ReplicaAdmission', () => {
  it('admits everything until 5 requests were answered, then predicts ms per request waiting', async () => {
    const clock = new ManualClock();
    let waiting = 0;
    const admission = new ReplicaAdmission(
      250,
      () => waiting,
      () => clock.now(),
    );
    for (let i = 0; i < 5; i += 1) {
      expect(admission.predictMs()).toBeUndefined();
      const sent = admission.admit();
      await clock.advance(100); // alone in the queue: 100 ms per request
      admission.answered(sent);
    }
    expect(admission.predictMs()).toBe(100);
    waiting = 1;
    expect(admission.predictMs()).toBe(200);
    expect(() => admission.admit()).not.toThrow();
    waiting = 2;
    expect(admission.predictMs()).toBe(300);
    expect(() => admission.admit()).toThrow(BatchError);
    expect(() => admission.admit()).toThrow('Overloaded: the predicted wait of 300 ms exceeds maxLatencyMs (250 ms)');
    // A group is admitted or refused whole: 1 waiting + 2 = 300 ms.
    waiting = 1;
    expect(() => admission.admit(2)).toThrow('the predicted wait of 300 ms');
  });

  it('learns per request ahead: a request that waited behind 3 others took a quarter of its time each', async () => {
    const clock = new ManualClock();
    let waiting = 3;
    const admission = new ReplicaAdmission(
      1_000,
      () => waiting,
      () => clock.now(),
    );
    for (let i = 0; i < 5; i += 1) {
      const sent = admission.admit();
      await clock.advance(400);
      admission.answered(sent);
    }
    waiting = 0;
    expect(admission.predictMs()).toBe(100);
  });

  it('refuses through the guarded batcher as a rejected call, or at a stream’s first next()', async () => {
    const clock = new ManualClock();
    const admission = new ReplicaAdmission(
      50,
      () => 0,
      () => clock.now(),
    );
    const batcher = createBatcher(async (inputs: number[]) => {
      await clock.advance(100);
      return inputs.map((input) => input * 2);
    });
    const streamer = createStreamingBatcher(async function* (inputs: number[]) {
      yield inputs;
    });
    const guarded = admission.guard(batcher);
    const guardedStreamer = admission.guard(streamer);
    for (let i = 0; i < 5; i += 1) expect(await guarded(i)).toBe(i * 2); // each took 100 ms: over 50
    await expect(guarded.call(1)).rejects.toMatchObject({ code: 'OVERLOADED', retryAfterSeconds: 1 });
    await expect(guarded.callAll([1, 2])).rejects.toMatchObject({ code: 'OVERLOADED' });
    const stream = guardedStreamer.stream(1);
    await expect(stream.next()).rejects.toMatchObject({ code: 'OVERLOADED' });
    // Everything else is the batcher's own.
    expect(guarded.name).toBe(batcher.name);
    expect(guarded.stats()).toEqual(batcher.stats());
  });
});
