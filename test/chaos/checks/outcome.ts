// What one request's exchange with a replica amounts to: an allowed outcome (the exact text, a JSON refusal, a stream
// ended by an error event) or a violation of the chaos run's contract, each counted apart.
import { compareText } from './text-check.js';

/** How an exchange ended, as the load generator saw it. */
export type ExchangeEnd =
  /** A whole (non-streamed) response body was read. */
  | 'body'
  /** A stream's `data: [DONE]`. */
  | 'done'
  /** A stream's `event: error`. */
  | 'error-event'
  /** The body ended without a terminal event (a stream cut short). */
  | 'eof'
  /** The connection failed: refused, reset, closed before a response. */
  | 'reset'
  /** The request's deadline (plus slack) passed with no end: the client gave up. */
  | 'deadline';

/** One request's exchange, recorded by the load generator. */
export interface Exchange {
  /** The HTTP status, when a response came. */
  readonly status: number | undefined;
  readonly streamed: boolean;
  readonly end: ExchangeEnd;
  /** A 200's completion text, or a stream's chunk texts joined. */
  readonly text: string;
  /** The `error.code` of a JSON error body or error event, when there is one. */
  readonly errorCode: string | undefined;
  /** Events that came after the stream's terminal event (`[DONE]` or `error`). */
  readonly eventsAfterEnd: number;
  /** What went wrong, in words, for the report's examples. */
  readonly detail: string | undefined;
}

/** Outcomes a request may have under chaos. */
export const ALLOWED_OUTCOMES = ['ok', 'refused', 'stream-error'] as const;
/** Outcomes that break the contract: each is counted and exits the run non-zero. */
export const VIOLATION_OUTCOMES = [
  'repeated',
  'skipped',
  'mismatched',
  'reset',
  'hang',
  'bad-status',
  'after-end',
] as const;

export type AllowedOutcome = (typeof ALLOWED_OUTCOMES)[number];
export type ViolationOutcome = (typeof VIOLATION_OUTCOMES)[number];
export type Outcome = AllowedOutcome | ViolationOutcome;

/**
 * The outcome of an exchange whose right text is `expected`: 200 with exactly that text (`ok`), 503/504 with a JSON
 * error (`refused`), a stream that ends with an error event after a prefix of the text (`stream-error`); anything
 * else is a violation, named by what went wrong.
 *
 * @example
 * ```ts
 * outcomeOf(exchange, 'Once upon a time'); // 'ok' | 'refused' | 'repeated' | ...
 * ```
 */
export function outcomeOf(exchange: Exchange, expected: string): Outcome {
  if (exchange.end === 'deadline') return 'hang';
  if (exchange.end === 'reset' || exchange.end === 'eof') return 'reset';
  if (exchange.status !== 200) {
    const refusal = (exchange.status === 503 || exchange.status === 504) && exchange.errorCode !== undefined;
    return refusal ? 'refused' : 'bad-status';
  }
  if (exchange.eventsAfterEnd > 0) return 'after-end';
  const complete = exchange.end !== 'error-event';
  if (!complete && exchange.errorCode === undefined) return 'bad-status';
  const verdict = compareText(expected, exchange.text, complete);
  if (verdict !== 'exact') return verdict;
  return complete ? 'ok' : 'stream-error';
}

/** Whether an outcome breaks the contract. */
export function isViolation(outcome: Outcome): outcome is ViolationOutcome {
  return (VIOLATION_OUTCOMES as readonly string[]).includes(outcome);
}
