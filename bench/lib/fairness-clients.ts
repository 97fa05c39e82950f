// The two clients of the fairness scenario (issue 11): a heavy one, closed loops of 16-prompt x 256-token
// completions that honour Retry-After, and a light one, 1-token completions at a steady pace. Each from a loopback
// address of its own (`localAddress`): the server's fairness key is the client's address, never OpenAI's `user`.
import { Agent, request } from 'node:http';

/** One request's fate, as the client saw it. */
export interface Outcome {
  /** Milliseconds since the run started, when the request was sent. */
  readonly sentAtMs: number;
  readonly ms: number;
  /** The HTTP status; 0 for a request that got no response (connection error, client timeout). */
  readonly status: number;
  /** The error code of a non-200 JSON body (`OVERLOADED`, `QUEUE_FULL`, ...). */
  readonly code: string | undefined;
  /** Seconds, from a 503's `Retry-After`; undefined when absent or not a positive integer. */
  readonly retryAfterS: number | undefined;
  /** `usage.completion_tokens` of a 200. */
  readonly completionTokens: number;
}

export interface ClientTarget {
  readonly port: number;
  /** Milliseconds since the run started (the clock outcomes are stamped with). */
  readonly now: () => number;
  /** The loopback address the client sends from (its fairness key at the server); the system's choice if absent. */
  readonly localAddress?: string;
}

/** Posts one JSON body to `/v1/completions`; never rejects (a failure is an outcome with status 0). */
export function postCompletion(
  target: ClientTarget,
  agent: Agent,
  body: object,
  timeoutMs = 120_000,
): Promise<Outcome> {
  const encoded = JSON.stringify(body);
  const sentAtMs = target.now();
  return new Promise((resolve) => {
    const failed = () =>
      resolve({
        sentAtMs,
        ms: target.now() - sentAtMs,
        status: 0,
        code: 'CLIENT_ERROR',
        retryAfterS: undefined,
        completionTokens: 0,
      });
    const req = request(
      {
        host: '127.0.0.1',
        port: target.port,
        path: '/v1/completions',
        method: 'POST',
        agent,
        ...(target.localAddress === undefined ? {} : { localAddress: target.localAddress }),
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(encoded) },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', failed);
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          let json: { error?: { code?: string }; usage?: { completion_tokens?: number } } | undefined;
          try {
            json = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof json;
          } catch {
            json = undefined;
          }
          const retryAfter = Number(res.headers['retry-after']);
          resolve({
            sentAtMs,
            ms: target.now() - sentAtMs,
            status,
            code: status === 200 ? undefined : json?.error?.code,
            retryAfterS: Number.isInteger(retryAfter) && retryAfter >= 1 ? retryAfter : undefined,
            completionTokens: json?.usage?.completion_tokens ?? 0,
          });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', failed);
    req.end(encoded);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `loops` closed loops, each sending `body` back to back until `untilMs`. After a 503 a loop waits what
 * `Retry-After` says, as the OpenAI SDKs do; without one (a server bug, counted by the caller) it waits 1 s, and
 * after a failed connection 1 s too, so a loop never spins hot.
 */
export async function closedLoops(
  target: ClientTarget,
  body: object,
  loops: number,
  untilMs: number,
  outcomes: Outcome[],
): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: loops });
  const loop = async (): Promise<void> => {
    while (target.now() < untilMs) {
      const outcome = await postCompletion(target, agent, body);
      outcomes.push(outcome);
      if (outcome.status === 200) continue;
      const waitMs = outcome.status === 503 && outcome.retryAfterS !== undefined ? outcome.retryAfterS * 1000 : 1000;
      await sleep(Math.min(waitMs, Math.max(0, untilMs - target.now())));
    }
  };
  try {
    await Promise.all(Array.from({ length: loops }, loop));
  } finally {
    agent.destroy();
  }
}

/**
 * One request every `1000 / rate` ms until `untilMs`, whatever the answers (open loop): the light client samples
 * the server evenly in time, and a refused request is not retried (it counts as not served).
 */
export async function pacedRequests(
  target: ClientTarget,
  bodies: readonly object[],
  rate: number,
  untilMs: number,
  outcomes: Outcome[],
): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const pending: Array<Promise<void>> = [];
  const startMs = target.now();
  try {
    for (let sent = 0; ; sent += 1) {
      const dueMs = startMs + (sent * 1000) / rate;
      if (dueMs >= untilMs) break;
      const delay = dueMs - target.now();
      if (delay > 0) await sleep(delay);
      pending.push(
        postCompletion(target, agent, bodies[sent % bodies.length] as object).then(
          (outcome) => void outcomes.push(outcome),
        ),
      );
    }
    await Promise.all(pending);
  } finally {
    agent.destroy();
  }
}
