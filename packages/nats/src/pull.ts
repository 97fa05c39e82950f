// Pulling from the workers' consumer with JetStream's own pull request (`$JS.API.CONSUMER.MSG.NEXT`), because a
// worker needs "whatever is waiting, at least one, at once": `no_wait` with `expires` blocks until an entry arrives,
// then returns at once with what is there, up to `batch`. (nats.js's `fetch()` waits for a full batch or its expiry,
// and refuses an expiry under 1 s.) Acknowledgements are JetStream's ack protocol on each message's reply subject.
import { createInbox } from '@nats-io/transport-node';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';

/** One delivered entry and how to settle it with JetStream. */
export interface Delivery {
  readonly data: string;
  /** The stream sequence: the entry's id. */
  readonly sequence: number;
  /** How many times JetStream delivered it, this time included. */
  readonly deliveryCount: number;
  /** When the stream stored it (ms since the epoch, the server's clock). */
  readonly storedAtMs: number;
  /** Answered: JetStream removes it from the work queue. */
  ack(): void;
  /** Give it back, to be delivered again after `delayMs` (to any worker). */
  nak(delayMs: number): void;
  /** Still running: restarts its `ack_wait`, so it is not delivered to another worker. */
  working(): void;
}

/** `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ns>.<pending>` (or the v2 form with domain/account). */
function parseAckSubject(reply: string): { deliveryCount: number; sequence: number; storedAtMs: number } | undefined {
  const tokens = reply.split('.');
  if (tokens[0] !== '$JS' || tokens[1] !== 'ACK') return undefined;
  const at = tokens.length === 9 ? 4 : tokens.length >= 11 ? 6 : -1;
  if (at < 0) return undefined;
  const deliveryCount = Number(tokens[at]);
  const sequence = Number(tokens[at + 1]);
  let storedAtMs: number;
  try {
    storedAtMs = Number(BigInt(tokens[at + 3] as string) / 1_000_000n);
  } catch {
    return undefined;
  }
  if (!Number.isFinite(deliveryCount) || !Number.isFinite(sequence)) return undefined;
  return { deliveryCount, sequence, storedAtMs };
}

function toDelivery(connection: NatsConnection, msg: Msg): Delivery | undefined {
  const reply = msg.reply;
  const info = reply === undefined ? undefined : parseAckSubject(reply);
  if (reply === undefined || info === undefined) return undefined;
  const send = (body: string): void => {
    try {
      connection.publish(reply, body);
    } catch {
      // Closed: JetStream redelivers what was not acknowledged.
    }
  };
  return {
    data: msg.string(),
    ...info,
    ack: () => send('+ACK'),
    nak: (delayMs) => send(delayMs > 0 ? `-NAK ${JSON.stringify({ delay: Math.round(delayMs * 1e6) })}` : '-NAK'),
    working: () => send('+WPI'),
  };
}

interface OpenPull {
  readonly id: string;
  readonly batch: number;
  readonly deliveries: Delivery[];
  readonly done: (status: number) => void;
}

/**
 * One worker's pulls, one at a time, on its own inbox.
 *
 * @example
 * ```ts
 * const puller = new Puller(connection, 'microbatch_q', 'workers');
 * const { deliveries } = await puller.pull(8, 500); // blocks up to 500 ms for the first
 * ```
 */
export class Puller {
  readonly #connection: NatsConnection;
  readonly #subject: string;
  readonly #inbox = createInbox();
  readonly #subscription: Subscription;
  #sequence = 0;
  #open: OpenPull | undefined;

  constructor(connection: NatsConnection, stream: string, consumer: string) {
    this.#connection = connection;
    this.#subject = `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`;
    this.#subscription = connection.subscribe(`${this.#inbox}.*`, {
      callback: (error, msg) => {
        if (error === null) this.#receive(msg);
      },
    });
  }

  #receive(msg: Msg): void {
    const code = msg.headers?.code ?? 0;
    if (code >= 100 && msg.data.length === 0) {
      // A status, on the pull's own inbox: 404 no messages, 408 request expired (after what was there), 409
      // (consumer deleted, limits). A status of an earlier pull (given up on) is ignored.
      const id = msg.subject.slice(this.#inbox.length + 1);
      if (this.#open?.id === id) this.#open.done(code);
      return;
    }
    // Deliveries keep their stream subject: they belong to the one pull open, if any.
    const open = this.#open;
    const delivery = toDelivery(this.#connection, msg);
    if (delivery === undefined) return;
    if (open === undefined) {
      // A late delivery for a pull given up on: back to the queue at once, for anyone.
      delivery.nak(0);
      return;
    }
    open.deliveries.push(delivery);
    if (open.deliveries.length >= open.batch) open.done(0);
  }

  /**
   * Up to `batch` entries: with `blockMs`, waits up to that long for the first, then returns at once with what is
   * waiting; without, returns at once. `status` is JetStream's last status code (0 for none), e.g. 409.
   */
  pull(batch: number, blockMs: number | undefined): Promise<{ deliveries: Delivery[]; status: number }> {
    const id = String(++this.#sequence);
    return new Promise((resolve) => {
      const deliveries: Delivery[] = [];
      // A guard for a request the server never answers (NATS restarted under it).
      const guard = setTimeout(() => done(0), (blockMs ?? 0) + 1_000);
      const done = (status: number): void => {
        if (this.#open?.id !== id) return;
        this.#open = undefined;
        clearTimeout(guard);
        resolve({ deliveries, status });
      };
      this.#open = { id, batch, deliveries, done };
      const request = {
        batch,
        no_wait: true,
        ...(blockMs === undefined ? {} : { expires: Math.round(blockMs * 1e6) }),
      };
      try {
        this.#connection.publish(this.#subject, JSON.stringify(request), { reply: `${this.#inbox}.${id}` });
      } catch {
        done(0);
      }
    });
  }

  close(): void {
    this.#open?.done(0);
    try {
      this.#subscription.unsubscribe();
    } catch {
      // The connection closed first: the subscription went with it.
    }
  }
}
