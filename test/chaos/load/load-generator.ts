// Steady mixed load on the replicas up now: a fixed number of requests in flight (closed loop), every other one
// streamed, greedy, prompts from the baseline's set, each with a deadline measured from its own start.
import type { Exchange } from '../checks/outcome.js';
import type { Incarnation } from '../fleet/fleet.js';
import type { PromptCase } from './baseline.js';
import { sendCompletion } from './send-request.js';

/** A lane's pause after an answer other than 200, so refusals do not turn the closed loop into a flood. */
const REFUSED_PAUSE_MS = 100;

/** One request the load generator sent, and what came back. */
export interface RequestRecord {
  readonly seq: number;
  /** The replica incarnation it was sent to (`replica-express#1`). */
  readonly replica: string;
  readonly promptIndex: number;
  readonly streamed: boolean;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly exchange: Exchange;
}

/** What {@link runLoad} sends. */
export interface LoadOptions {
  readonly cases: readonly PromptCase[];
  /** Requests in flight at once. */
  readonly concurrency: number;
  readonly maxTokens: number;
  /** The client aborts a request this long after its start: the fleet's deadline plus slack. */
  readonly giveUpMs: number;
  /** The replicas up at the moment a request is sent. */
  readonly replicas: () => readonly Incarnation[];
  /** Stops sending new requests once aborted; the ones in flight are read to their end. */
  readonly signal: AbortSignal;
}

/**
 * Sends requests until `signal` aborts, then waits for the ones in flight; resolves with every request's record.
 *
 * @example
 * ```ts
 * const records = await runLoad({ cases, concurrency: 8, maxTokens: 48, giveUpMs: 45_000, replicas: () => fleet.liveReplicas(), signal });
 * ```
 */
export async function runLoad(options: LoadOptions): Promise<RequestRecord[]> {
  if (!Number.isInteger(options.concurrency) || options.concurrency < 1) {
    throw new TypeError(`Expected \`concurrency\` to be an integer >= 1, got ${options.concurrency}`);
  }
  const records: RequestRecord[] = [];
  let seq = 0;
  const lane = async (): Promise<void> => {
    while (!options.signal.aborted) {
      const replicas = options.replicas();
      if (replicas.length === 0) {
        // Both replicas down at once (a kill and a restart overlapping): nothing to send to for a moment.
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      const mine = seq++;
      const replica = replicas[mine % replicas.length] as Incarnation;
      const promptIndex = Math.floor(mine / 2) % options.cases.length;
      const streamed = mine % 2 === 1;
      const startedAt = Date.now();
      const exchange = await sendCompletion({
        url: replica.url as string,
        prompt: (options.cases[promptIndex] as PromptCase).prompt,
        maxTokens: options.maxTokens,
        stream: streamed,
        giveUpMs: options.giveUpMs,
      });
      records.push({ seq: mine, replica: replica.id, promptIndex, streamed, startedAt, endedAt: Date.now(), exchange });
      // A refusal comes back at once: without a pause, a lane would spin on a fleet without workers.
      if (exchange.status !== 200) await new Promise((resolve) => setTimeout(resolve, REFUSED_PAUSE_MS));
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, lane));
  return records.sort((a, b) => a.seq - b.seq);
}
