import { BatchError, ErrorCode } from '@microbatch/core';
import type { BatcherBase, CallOptions, StreamingBatcher } from '@microbatch/core';

/** How many answered requests the estimate needs before it refuses anything (core's latency model waits for 5). */
const MIN_SAMPLES = 5;
/** How much each answered request moves the estimate: it follows a fleet that slows down within a few requests. */
const WEIGHT = 0.2;

/** When an admitted request was sent, and how many of this replica's requests were waiting then. */
interface Sent {
  readonly ahead: number;
  readonly sentAt: number;
}

// oxlint-disable-next-line require-yield -- it only throws, at the first `next()`.
async function* refused(error: unknown): AsyncIterableIterator<never> {
  throw error;
}

/**
 * Latency-aware admission for a web replica, whose model runs on workers behind a shared queue: it refuses at once
 * (`OVERLOADED`, 503 + `Retry-After`) a request predicted to be answered later than `maxLatencyMs`. The prediction
 * is `msPerRequest × (requests of this replica waiting for answers + 1)`, where `msPerRequest` is a moving average
 * of what each answered request took per request of this replica that was waiting when it was sent: requests of
 * other replicas ahead in the queue show up as a larger `msPerRequest`. Until {@link MIN_SAMPLES} requests were
 * answered there is no estimate and every request is admitted.
 *
 * @example
 * ```ts
 * const admission = new ReplicaAdmission(1500, () => generate.queueLength);
 * const guarded = admission.guard(generate);
 * ```
 */
export class ReplicaAdmission {
  readonly #maxLatencyMs: number;
  readonly #waiting: () => number;
  readonly #now: () => number;
  #msPerRequest = 0;
  #samples = 0;

  constructor(maxLatencyMs: number, waiting: () => number, now: () => number = () => performance.now()) {
    if (typeof maxLatencyMs !== 'number' || Number.isNaN(maxLatencyMs) || maxLatencyMs <= 0) {
      throw new TypeError(
        `Expected \`maxLatencyMs\` to be a number > 0, got \`${String(maxLatencyMs)}\` (${typeof maxLatencyMs})`,
      );
    }
    this.#maxLatencyMs = maxLatencyMs;
    this.#waiting = waiting;
    this.#now = now;
  }

  /** The predicted ms until `count` requests sent now are answered; `undefined` before the estimate is ready. */
  predictMs(count = 1): number | undefined {
    return this.#samples < MIN_SAMPLES ? undefined : this.#msPerRequest * (this.#waiting() + count);
  }

  /**
   * Admits `count` requests, or throws `OVERLOADED`; returns what {@link answered} needs once one is answered.
   */
  admit(count = 1): Sent {
    const predicted = this.predictMs(count);
    if (predicted !== undefined && predicted > this.#maxLatencyMs) {
      const ms = Math.ceil(predicted);
      throw new BatchError(
        ErrorCode.OVERLOADED,
        `Overloaded: the predicted wait of ${ms} ms exceeds maxLatencyMs (${Math.floor(this.#maxLatencyMs)} ms)`,
        {
          retryAfterSeconds: Math.max(1, Math.ceil((predicted - this.#maxLatencyMs) / 1000)),
          details: { cause: 'latency', predictedMs: ms, limitMs: Math.floor(this.#maxLatencyMs) },
        },
      );
    }
    return { ahead: this.#waiting(), sentAt: this.#now() };
  }

  /** Learns from one answered request, sent with `ahead` requests of this replica waiting. */
  answered(sent: Sent): void {
    const sample = (this.#now() - sent.sentAt) / (sent.ahead + 1);
    this.#msPerRequest = this.#samples === 0 ? sample : this.#msPerRequest + WEIGHT * (sample - this.#msPerRequest);
    this.#samples += 1;
  }

  /**
   * `batcher` with this admission in front of `call`, `callAll`, `stream` and `streamAll` (a group is admitted or
   * refused whole); everything else (stats, events, close) is the batcher's own.
   */
  guard<B extends BatcherBase>(guarded: B): B {
    // Only the methods both kinds share are called on a plain batcher; `stream` is reached on streaming ones only.
    const batcher = guarded as unknown as StreamingBatcher<unknown, unknown>;
    // Refusals come as a rejected promise, or at a stream's first `next()`, as core's batchers give them.
    const call = async (input: unknown, options?: CallOptions): Promise<unknown> => {
      const sent = this.admit();
      const value = await batcher.call(input, options);
      this.answered(sent);
      return value;
    };
    const callAll = async (inputs: readonly unknown[], options?: CallOptions): Promise<unknown[]> => {
      const sent = this.admit(inputs.length);
      const values = await batcher.callAll(inputs, options);
      this.answered(sent);
      return values;
    };
    const stream = (input: unknown, options?: CallOptions): AsyncIterableIterator<unknown> => {
      let sent: Sent;
      try {
        sent = this.admit();
      } catch (error) {
        return refused(error);
      }
      return this.#learnAtEnd(batcher.stream(input, options), sent);
    };
    const streamAll = (inputs: readonly unknown[], options?: CallOptions): Array<AsyncIterableIterator<unknown>> => {
      let sent: Sent;
      try {
        sent = this.admit(inputs.length);
      } catch (error) {
        return inputs.map(() => refused(error));
      }
      return batcher.streamAll(inputs, options).map((values) => this.#learnAtEnd(values, sent));
    };
    const own: Record<PropertyKey, unknown> = { call, callAll, stream, streamAll };
    return new Proxy(guarded, {
      apply: (_target, _this, args: [unknown, CallOptions?]) => call(...args),
      get: (target, key) => (Object.hasOwn(own, key) ? own[key] : Reflect.get(target, key)),
    });
  }

  async *#learnAtEnd(values: AsyncIterableIterator<unknown>, sent: Sent): AsyncIterableIterator<unknown> {
    yield* values;
    this.answered(sent);
  }
}
