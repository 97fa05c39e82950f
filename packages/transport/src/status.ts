/**
 * A change in what a web replica or a worker can reach, reported once per change (never once per failed command):
 * `broker-down` / `broker-up` when its connection to the broker (Redis, NATS) is lost / ready again, and on a web replica
 * `workers-down` / `workers-up` when no worker has heartbeated within `heartbeatTtlMs` / one has again (`failed`: the
 * items answered 503 at once, only without a grace), and `workers-gone` when none came back within `workerGraceMs`
 * and the items still waiting were answered 503 (`failed` of them; not reported when none waited). The first state
 * seen is reported too, so a log shows where a process started from.
 *
 * @example
 * ```ts
 * createRedisQueue({ url, queue, onStatus: (status) => logger.warn(status, status.event) });
 * ```
 */
export type QueueStatus =
  | { readonly event: 'broker-up'; readonly queue: string }
  | { readonly event: 'broker-down'; readonly queue: string; readonly error: string }
  | { readonly event: 'workers-up'; readonly queue: string; readonly workers: number }
  | { readonly event: 'workers-down'; readonly queue: string; readonly failed: number }
  | { readonly event: 'workers-gone'; readonly queue: string; readonly failed: number; readonly graceMs: number };

/** Receives {@link QueueStatus} changes; a throw is ignored (reporting must not break the queue). */
export type StatusListener = (status: QueueStatus) => void;

/** Reports a boolean state's changes once each, starting with the first state seen. */
export class StateReporter {
  #state: boolean | undefined;

  /** Records `state`; returns whether it changed (true for the first state seen). */
  set(state: boolean): boolean {
    if (this.#state === state) return false;
    this.#state = state;
    return true;
  }

  get state(): boolean | undefined {
    return this.#state;
  }
}

export function emitStatus(listener: StatusListener | undefined, status: QueueStatus): void {
  try {
    listener?.(status);
  } catch {
    // A listener's failure must not fail the queue.
  }
}
