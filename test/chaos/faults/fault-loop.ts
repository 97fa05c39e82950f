// The chaos loop: every 10-20 s (seeded, logged) one fault on the fleet or its broker, then the wait for what it
// broke to come back. Each round of four faults takes every kind once, in a seeded order, so a short run still
// covers them all.
import type { ChaosBroker } from '../fleet/broker.js';
import type { Fleet } from '../fleet/fleet.js';
import { type Random, pick, shuffle, uniform } from './random.js';

export const FAULT_KINDS = ['kill-worker', 'kill-replica', 'kill-broker', 'stop-worker'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** One injected fault. */
export interface FaultRecord {
  readonly kind: FaultKind;
  /** The incarnation hit (or the broker). */
  readonly target: string;
  readonly startedAt: number;
  /** When what it broke was back: restarted and ready, resumed. */
  readonly recoveredAt: number;
  readonly detail: string;
}

/** What {@link runFaults} does. */
export interface FaultLoopOptions {
  readonly fleet: Fleet;
  readonly broker: ChaosBroker;
  readonly random: Random;
  /** The pause before each fault, drawn uniformly. */
  readonly minIntervalMs: number;
  readonly maxIntervalMs: number;
  /** The workers' `--claim-idle-ms`: a SIGSTOP lasts longer than it, so the entries are taken over. */
  readonly claimIdleMs: number;
  /** No fault starts after this time (`Date.now()`). */
  readonly until: number;
  readonly log: (line: string) => void;
}

/**
 * Injects faults until `until`; resolves with each one once the last has recovered.
 *
 * @example
 * ```ts
 * const faults = await runFaults({ fleet, broker, random: seeded(7), minIntervalMs: 10_000, maxIntervalMs: 20_000, claimIdleMs: 2_000, until: Date.now() + 60_000, log: console.log });
 * ```
 */
export async function runFaults(options: FaultLoopOptions): Promise<FaultRecord[]> {
  const { random, log } = options;
  const faults: FaultRecord[] = [];
  let round: FaultKind[] = [];
  for (;;) {
    const pauseMs = Math.round(uniform(random, options.minIntervalMs, options.maxIntervalMs));
    if (Date.now() + pauseMs >= options.until) return faults;
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    if (round.length === 0) round = shuffle(random, [...FAULT_KINDS]);
    const kind = round.shift() as FaultKind;
    const startedAt = Date.now();
    let injected: { target: string; detail: string };
    try {
      injected = await inject(kind, options);
    } catch (error) {
      // The member picked was down already (restarting after an exit of its own): no fault this time.
      log(`fault skipped: ${kind}: ${String(error)}`);
      continue;
    }
    const { target, detail } = injected;
    const fault: FaultRecord = { kind, target, startedAt, recoveredAt: Date.now(), detail };
    faults.push(fault);
    log(
      `fault ${faults.length}: ${kind} ${target} after ${pauseMs} ms; ${detail}; back in ${fault.recoveredAt - startedAt} ms`,
    );
  }
}

async function inject(kind: FaultKind, options: FaultLoopOptions): Promise<{ target: string; detail: string }> {
  const { fleet, broker, random } = options;
  switch (kind) {
    case 'kill-worker':
    case 'kill-replica': {
      const role = kind === 'kill-worker' ? 'worker' : 'replica';
      const member = pick(
        random,
        fleet.members.filter((name) => name.startsWith(`${role}-`)),
      );
      const { killed, started } = await fleet.killAndRestart(member);
      return { target: killed, detail: `SIGKILL, restarted as ${started}` };
    }
    case 'kill-broker': {
      const downMs = Math.round(uniform(random, 1_000, 3_000));
      await broker.kill();
      await new Promise((resolve) => setTimeout(resolve, downMs));
      await broker.restart();
      return {
        target: broker.kind,
        detail: `SIGKILL, down ${downMs} ms, restarted on its port (${broker.persistence})`,
      };
    }
    case 'stop-worker': {
      const member = pick(
        random,
        fleet.members.filter((name) => name.startsWith('worker-')),
      );
      const pauseMs = options.claimIdleMs + Math.round(uniform(random, 1_000, 3_000));
      const paused = await fleet.pause(member, pauseMs);
      return { target: paused, detail: `SIGSTOP ${pauseMs} ms (claim-idle ${options.claimIdleMs} ms), then SIGCONT` };
    }
  }
}
