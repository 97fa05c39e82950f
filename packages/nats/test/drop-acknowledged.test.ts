// After a NATS crash, a work-queue stream can hold entries below its consumer's acknowledgement floor (acknowledged,
// their deletion lost): delivered to nobody again, they would hold the queue's bound for good.
import type { JetStreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { dropAcknowledged } from '../src/broker.js';
import { queueNames } from '../src/names.js';

/** A manager whose stream holds `first..last` and whose consumer acknowledged up to `floor`; records purges. */
function fakeManager(first: number, last: number, floor: number, purges: unknown[]): JetStreamManager {
  const messages = last >= first ? last - first + 1 : 0;
  return {
    consumers: { info: async () => ({ ack_floor: { stream_seq: floor, consumer_seq: floor } }) },
    streams: {
      info: async () => ({ state: { messages, first_seq: first, last_seq: last } }),
      purge: async (name: string, options: { seq: number }) => {
        purges.push([name, options]);
        return { success: true, purged: Math.max(0, Math.min(options.seq - 1, last) - first + 1) };
      },
    },
  } as unknown as JetStreamManager;
}

describe('dropAcknowledged', () => {
  const names = queueNames('microbatch', 'q');

  it('purges what lies at or below the acknowledgement floor, and nothing above it', async () => {
    const purges: unknown[] = [];
    expect(await dropAcknowledged(fakeManager(259, 920, 901, purges), names)).toBe(643);
    expect(purges).toEqual([[names.stream, { seq: 902 }]]);
  });

  it('leaves a stream alone whose entries are all above the floor, or that is empty', async () => {
    const purges: unknown[] = [];
    expect(await dropAcknowledged(fakeManager(902, 910, 901, purges), names)).toBe(0);
    expect(await dropAcknowledged(fakeManager(1, 0, 0, purges), names)).toBe(0);
    expect(purges).toEqual([]);
  });
});
