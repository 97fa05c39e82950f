// Open-loop HTTP load: requests leave on a fixed schedule whatever the server does, as real clients arrive, so an
// overloaded server shows its queueing (closed-loop clients would slow down with it). Only 127.0.0.1 is targeted.
// A load generator on 2 shared cores cannot send much more than ~500 requests/s on time: callers cap the rate, and
// the result reports the rate actually achieved.
import { Agent, request } from 'node:http';
import { percentile } from './stats.js';

export interface OpenLoopOptions {
  readonly port: number;
  readonly path: string;
  readonly bodies: readonly object[];
  /** Requests per second offered. */
  readonly rate: number;
  readonly seconds: number;
  /** Called about every 250 ms with the requests sent and answered so far. */
  readonly onTick?: (sent: number, answered: number, elapsedS: number) => void;
  /** Where every 200's latency (ms) is also pushed: to pool several windows into one percentile. */
  readonly latencies?: number[];
}

/** One request's fate. */
interface Outcome {
  readonly status: number;
  readonly ms: number;
  readonly code: string | undefined;
  readonly retryAfter: string | undefined;
}

export interface OpenLoopResult {
  readonly offered_rate: number;
  readonly achieved_rate: number;
  readonly seconds: number;
  readonly sent: number;
  /** Requests that got exactly one HTTP response (the rest: `errors`). */
  readonly answered: number;
  readonly ok: number;
  /** 503 answers, by error code. */
  readonly refused: Readonly<Record<string, number>>;
  readonly refused_total: number;
  /** 503 answers that carried a Retry-After header. */
  readonly refused_with_retry_after: number;
  readonly other_status: number;
  readonly errors: number;
  readonly accepted_p50_ms: number;
  readonly accepted_p99_ms: number;
  readonly refusal_p50_ms: number;
  readonly refusal_p90_ms: number;
  /** 200s per second, from the first request until the last answer (the drain after the window counts). */
  readonly accepted_per_s: number;
  /** Seconds from the end of sending until the last answer arrived. */
  readonly drain_s: number;
}

export async function runOpenLoop(options: OpenLoopOptions): Promise<OpenLoopResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const encoded = options.bodies.map((body) => JSON.stringify(body));
  const outcomes: Outcome[] = [];
  let errors = 0;
  let sent = 0;
  const pending = new Set<Promise<void>>();
  const send = (body: string): void => {
    const started = performance.now();
    const settled = new Promise<void>((resolve) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: options.port,
          path: options.path,
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          timeout: 120_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const ms = performance.now() - started;
            const status = res.statusCode ?? 0;
            let code: string | undefined;
            if (status !== 200) {
              try {
                code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: string } }).error
                  ?.code;
              } catch {
                code = undefined;
              }
            }
            const retryAfter = res.headers['retry-after'];
            outcomes.push({ status, ms, code, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined });
            resolve();
          });
          res.on('error', () => {
            errors += 1;
            resolve();
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', () => {
        errors += 1;
        resolve();
      });
      req.end(body);
    });
    pending.add(settled);
    void settled.then(() => pending.delete(settled));
  };

  const start = performance.now();
  const total = Math.round(options.rate * options.seconds);
  const ticker = setInterval(
    () => options.onTick?.(sent, outcomes.length + errors, (performance.now() - start) / 1000),
    250,
  );
  // A 1 ms timer that catches up: every request due by now leaves now, so a late timer does not lower the rate.
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * options.rate));
      while (sent < due) send(encoded[sent++ % encoded.length] as string);
      if (sent >= total) {
        clearInterval(tick);
        resolve();
      }
    }, 1);
  });
  const sendingS = (performance.now() - start) / 1000;
  const sendingEnd = performance.now();
  await Promise.all(pending);
  clearInterval(ticker);
  agent.destroy();
  const drainS = (performance.now() - sendingEnd) / 1000;

  const accepted = outcomes
    .filter((o) => o.status === 200)
    .map((o) => o.ms)
    .sort((a, b) => a - b);
  options.latencies?.push(...accepted);
  const refusals = outcomes.filter((o) => o.status === 503);
  const refusalMs = refusals.map((o) => o.ms).sort((a, b) => a - b);
  const refused: Record<string, number> = {};
  for (const o of refusals) refused[o.code ?? 'unknown'] = (refused[o.code ?? 'unknown'] ?? 0) + 1;
  return {
    offered_rate: options.rate,
    achieved_rate: sent / sendingS,
    seconds: sendingS,
    sent,
    answered: outcomes.length,
    ok: accepted.length,
    refused,
    refused_total: refusals.length,
    refused_with_retry_after: refusals.filter((o) => o.retryAfter !== undefined && Number(o.retryAfter) >= 1).length,
    other_status: outcomes.length - accepted.length - refusals.length,
    errors,
    accepted_p50_ms: percentile(accepted, 50),
    accepted_p99_ms: percentile(accepted, 99),
    refusal_p50_ms: percentile(refusalMs, 50),
    refusal_p90_ms: percentile(refusalMs, 90),
    accepted_per_s: accepted.length / (sendingS + drainS),
    drain_s: drainS,
  };
}
