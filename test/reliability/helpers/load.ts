// Load generators with exact accounting: a closed loop (a fixed number of clients, each sending its next request
// when the previous one is answered) to measure the sustainable rate, and an open loop (requests sent at a fixed
// rate whatever the server does) to overload it. Both are bounded in request count and in time.
import type { Agent } from 'node:http';
import { type Answer, type Outcome, type SendOptions, send } from './http.js';
import { seededRandom } from '@microbatch/core/util';

/** One request of a load: path and options for `send` (the agent and timeout are the generator's). */
export interface LoadRequest {
  readonly path: string;
  readonly options?: Omit<SendOptions, 'agent' | 'timeoutMs'>;
}

/** Classifies one answer: a name for the tally (`'ok'`, `'queue_full'`...), or `'unexpected: why'`. */
export type Classify = (answer: Answer, index: number) => string;

/** What a load produced: every request sent and what became of each, counted. */
export interface LoadReport {
  readonly sent: number;
  /** Requests with exactly one complete response. */
  readonly answered: number;
  /** Requests with no complete response: connection errors and timeouts. */
  readonly lost: number;
  readonly timeouts: number;
  /** Answers by class, from `classify`. */
  readonly classes: Record<string, number>;
  /** Answers by HTTP status. */
  readonly statuses: Record<string, number>;
  /** Failures by error code. */
  readonly errors: Record<string, number>;
  /** Milliseconds from the first request sent to the last one settled. */
  readonly elapsedMs: number;
  /** Milliseconds over which requests were being sent. */
  readonly sendingMs: number;
  /** Latency percentiles (ms) of the answers, by class. */
  readonly latencyMs: Record<string, { readonly p50: number; readonly p99: number; readonly max: number }>;
  /** When each `'ok'` answer arrived, in ms from the start (for throughput over a window). */
  readonly okAtMs: readonly number[];
  /** The most requests in flight at once. */
  readonly peakInFlight: number;
  /** A few examples of unexpected answers and errors, for failure messages. */
  readonly samples: readonly string[];
}

class Tally {
  sent = 0;
  answered = 0;
  timeouts = 0;
  inFlight = 0;
  peakInFlight = 0;
  readonly classes: Record<string, number> = {};
  readonly statuses: Record<string, number> = {};
  readonly errors: Record<string, number> = {};
  readonly latencies: Record<string, number[]> = {};
  readonly okAt: number[] = [];
  readonly samples: string[] = [];
  readonly started = performance.now();

  constructor(readonly classify: Classify) {}

  begin(): void {
    this.sent += 1;
    this.inFlight += 1;
    this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
  }

  settle(outcome: Outcome, index: number): void {
    this.inFlight -= 1;
    if (outcome.kind === 'answered') {
      this.answered += 1;
      const { status } = outcome.answer;
      this.statuses[status] = (this.statuses[status] ?? 0) + 1;
      const name = this.classify(outcome.answer, index);
      this.classes[name] = (this.classes[name] ?? 0) + 1;
      (this.latencies[name] ??= []).push(outcome.ms);
      if (name === 'ok') this.okAt.push(performance.now() - this.started);
      else if (name.startsWith('unexpected') && this.samples.length < 5) {
        this.samples.push(`${name}: ${status} ${outcome.answer.body.slice(0, 200)}`);
      }
      return;
    }
    if (outcome.kind === 'timeout') this.timeouts += 1;
    const code = outcome.kind === 'timeout' ? 'timeout' : outcome.error;
    this.errors[code] = (this.errors[code] ?? 0) + 1;
    if (this.samples.length < 5) this.samples.push(`request ${index}: ${code} after ${outcome.ms.toFixed(0)} ms`);
  }

  report(sendingMs: number): LoadReport {
    const latencyMs: LoadReport['latencyMs'] = {};
    for (const [name, values] of Object.entries(this.latencies)) {
      const sorted = [...values].sort((a, b) => a - b);
      const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
      latencyMs[name] = { p50: round(at(0.5)), p99: round(at(0.99)), max: round(sorted.at(-1) ?? 0) };
    }
    return {
      sent: this.sent,
      answered: this.answered,
      lost: this.sent - this.answered,
      timeouts: this.timeouts,
      classes: this.classes,
      statuses: this.statuses,
      errors: this.errors,
      elapsedMs: performance.now() - this.started,
      sendingMs,
      latencyMs,
      okAtMs: this.okAt,
      peakInFlight: this.peakInFlight,
      samples: this.samples,
    };
  }
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

export interface ClosedLoopOptions {
  readonly url: string;
  readonly agent: Agent;
  /** Clients, each with at most one request in flight. */
  readonly clients: number;
  /** Stop sending after this long (requests in flight are still awaited). */
  readonly durationMs: number;
  /** And never send more than this many in all. */
  readonly maxRequests: number;
  readonly timeoutMs: number;
  readonly request: (index: number) => LoadRequest;
  readonly classify: Classify;
}

/** `clients` clients sending back to back for `durationMs`: the server's sustainable rate is `ok / sendingMs`. */
export async function closedLoop(options: ClosedLoopOptions): Promise<LoadReport> {
  const tally = new Tally(options.classify);
  const stopAt = tally.started + options.durationMs;
  let next = 0;
  const client = async (): Promise<void> => {
    while (performance.now() < stopAt && next < options.maxRequests) {
      const index = next++;
      const { path, options: extra } = options.request(index);
      tally.begin();
      tally.settle(
        await send(options.url, path, { ...extra, agent: options.agent, timeoutMs: options.timeoutMs }),
        index,
      );
    }
  };
  await Promise.all(Array.from({ length: options.clients }, client));
  return tally.report(Math.min(options.durationMs, performance.now() - tally.started));
}

export interface OpenLoopOptions {
  readonly url: string;
  readonly agent: Agent;
  /** Requests per second, sent whatever the server does. */
  readonly rate: number;
  readonly durationMs: number;
  /** A safety bound on requests in flight: past it, sending pauses (counted in `deferred`; should stay 0). */
  readonly maxInFlight: number;
  readonly timeoutMs: number;
  readonly request: (index: number) => LoadRequest;
  readonly classify: Classify;
  /** Called every `tickMs` while sending (for example to sample the server's memory). */
  readonly onTick?: (elapsedMs: number) => void;
  /**
   * Stops sending early, once at least `minDurationMs` have passed, when this returns true for the answers so far
   * (classes by name): bounds the work by what the test needs to see rather than by a duration guessed for one
   * machine's speed.
   */
  readonly stopWhen?: (classes: Readonly<Record<string, number>>) => boolean;
  /** @default durationMs */
  readonly minDurationMs?: number;
  /** Called once when sending stops, before the answers still in flight are awaited. */
  readonly onSendingEnd?: (elapsedMs: number) => void;
}

/**
 * Sends `rate` requests per second for `durationMs` (so at most `rate * durationMs / 1000`), or until `stopWhen`
 * holds, then awaits them all.
 */
export async function openLoop(options: OpenLoopOptions): Promise<LoadReport & { readonly deferred: number }> {
  const tally = new Tally(options.classify);
  const total = Math.floor((options.rate * options.durationMs) / 1000);
  const pending: Promise<void>[] = [];
  let deferred = 0;
  let sent = 0;
  const tickMs = 5;
  while (sent < total) {
    const elapsed = performance.now() - tally.started;
    if (elapsed > options.durationMs + 1_000) break; // the client fell behind: never overrun the time bound
    if (
      options.stopWhen !== undefined &&
      elapsed >= (options.minDurationMs ?? options.durationMs) &&
      options.stopWhen(tally.classes)
    )
      break;
    const due = Math.min(total, Math.floor((elapsed * options.rate) / 1000));
    while (sent < due) {
      if (tally.inFlight >= options.maxInFlight) {
        deferred += 1;
        break;
      }
      const index = sent++;
      const { path, options: extra } = options.request(index);
      tally.begin();
      pending.push(
        send(options.url, path, { ...extra, agent: options.agent, timeoutMs: options.timeoutMs }).then((outcome) =>
          tally.settle(outcome, index),
        ),
      );
    }
    options.onTick?.(elapsed);
    await new Promise((resolve) => setTimeout(resolve, tickMs));
  }
  const sendingMs = performance.now() - tally.started;
  options.onSendingEnd?.(sendingMs);
  await Promise.all(pending);
  return { ...tally.report(sendingMs), deferred };
}

/** Answers classed `'ok'` per second between `fromMs` and `toMs` of a report's clock. */
export function okRate(report: LoadReport, fromMs: number, toMs: number): number {
  const inWindow = report.okAtMs.filter((at) => at >= fromMs && at < toMs).length;
  return toMs > fromMs ? (inWindow * 1000) / (toMs - fromMs) : 0;
}

/** A small deterministic PRNG, so a storm's random moments are the same on every run. */
export const prng = seededRandom;
