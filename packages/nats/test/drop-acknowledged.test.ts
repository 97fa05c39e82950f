// nats-server (2.9) can keep acknowledged entries in a work-queue stream (after a crash, below the consumer's
// acknowledgement floor; under chaos, above it too): delivered to nobody again, they would hold the queue's bound for
// good. The worker purges what is certainly acknowledged, and nothing else.
import type { JetStreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { dropAcknowledged } from '../src/broker.js';
import { queueNames } from '../src/names.js';

interface Consumer {
  readonly floor: number;
  readonly delivered: number;
  readonly ackPending: number;
  readonly redelivered: number;
}

/** A manager whose stream holds `first..last`, with the consumer's state `consumer`; records purges. */
function fakeManager(first: number, last: number, consumer: Consumer, purges: unknown[]): JetStreamManager {
  const messages = last >= first ? last - first + 1 : 0;
  return {
    consumers: {
      info: async () => ({
        ack_floor: { stream_seq: consumer.floor, consumer_seq: consumer.floor },
        delivered: { stream_seq: consumer.delivered, consumer_seq: consumer.delivered },
        num_ack_pending: consumer.ackPending,
        num_redelivered: consumer.redelivered,
      }),
    },
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

  it('purges up to the acknowledgement floor while deliveries await their acknowledgement', async () => {
    const purges: unknown[] = [];
    const busy = { floor: 901, delivered: 915, ackPending: 3, redelivered: 0 };
    expect(await dropAcknowledged(fakeManager(259, 920, busy, purges), names)).toBe(643);
    expect(purges).toEqual([[names.stream, { seq: 902 }]]);
  });

  it('purges everything delivered once nothing awaits an acknowledgement or a redelivery', async () => {
    const purges: unknown[] = [];
    // The state test:chaos left: 22 entries above the floor, all delivered, none pending.
    const idle = { floor: 7372, delivered: 7396, ackPending: 0, redelivered: 0 };
    expect(await dropAcknowledged(fakeManager(7374, 7395, idle, purges), names)).toBe(22);
    expect(purges).toEqual([[names.stream, { seq: 7397 }]]);
    // A redelivery under way keeps what lies above the floor.
    const redelivering = { ...idle, redelivered: 1 };
    expect(await dropAcknowledged(fakeManager(7374, 7395, redelivering, []), names)).toBe(0);
  });

  it('leaves a stream alone whose entries are all beyond what is settled, or that is empty', async () => {
    const purges: unknown[] = [];
    const busy = { floor: 901, delivered: 905, ackPending: 4, redelivered: 0 };
    expect(await dropAcknowledged(fakeManager(902, 910, busy, purges), names)).toBe(0);
    expect(await dropAcknowledged(fakeManager(1, 0, { ...busy, floor: 0 }, purges), names)).toBe(0);
    expect(purges).toEqual([]);
  });
});
