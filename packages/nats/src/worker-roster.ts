// The live workers as a web replica hears them: each announces itself every `heartbeatMs` (and at once when asked),
// and says goodbye when it stops.
import type { NatsConnection } from '@nats-io/transport-node';
import { type WorkerSettings, parseWorkerSettings } from '@microbatch/transport';

/** What a worker announces (JSON on the queue's `workers` subject). */
export interface Announcement {
  readonly id: string;
  readonly settings: WorkerSettings;
  /** The worker is stopping: forget it now rather than at `heartbeatTtlMs`. */
  readonly gone?: boolean;
}

/** What a web replica announces (JSON on the queue's `replicas` subject). */
export interface ReplicaAnnouncement {
  /** Its reply subject: what its entries name. */
  readonly reply: string;
  /** Silent for longer than this, it is gone. */
  readonly ttlMs: number;
  /** It closed: nothing of it is left to answer. */
  readonly gone?: boolean;
  /** Its items in flight per fairness key, as JSON (`FleetView.published()`): the other replicas' fairness reads it. */
  readonly load?: string;
}

/**
 * The other web replicas' items in flight per fairness key, as a replica hears their announcements: a replica silent
 * past its TTL, or gone, counts no more.
 */
export class ReplicaLoads {
  readonly #self: string;
  readonly #seen = new Map<string, { at: number; ttlMs: number; load: string }>();

  /** `self`: this replica's reply subject (its own announcements are not another's load). */
  constructor(self: string) {
    this.#self = self;
  }

  record(text: string): void {
    let announcement: Partial<ReplicaAnnouncement>;
    try {
      announcement = JSON.parse(text) as Partial<ReplicaAnnouncement>;
    } catch {
      return;
    }
    const { reply, ttlMs, gone, load } = announcement;
    if (typeof reply !== 'string' || reply === this.#self || typeof ttlMs !== 'number') return;
    if (gone === true || typeof load !== 'string') this.#seen.delete(reply);
    else this.#seen.set(reply, { at: Date.now(), ttlMs, load });
  }

  /** The live replicas' published loads (for `mergeLoads`); forgets the silent ones. */
  loads(): string[] {
    const now = Date.now();
    for (const [reply, { at, ttlMs }] of this.#seen) if (now - at > ttlMs) this.#seen.delete(reply);
    return [...this.#seen.values()].map(({ load }) => load);
  }
}

/**
 * The web replicas a worker has heard from, by reply subject. A replica never heard from (this worker just started)
 * counts as alive: only one that fell silent, or said goodbye, is gone.
 */
export class ReplicaRoster {
  readonly #seen = new Map<string, { at: number; ttlMs: number }>();

  listen(connection: NatsConnection, subject: string): void {
    connection.subscribe(subject, {
      callback: (error, msg) => {
        if (error !== null) return;
        let announcement: Partial<ReplicaAnnouncement>;
        try {
          announcement = JSON.parse(msg.string()) as Partial<ReplicaAnnouncement>;
        } catch {
          return;
        }
        const { reply, ttlMs, gone } = announcement;
        if (typeof reply !== 'string' || typeof ttlMs !== 'number') return;
        this.#seen.set(reply, { at: gone === true ? Number.NEGATIVE_INFINITY : Date.now(), ttlMs });
      },
    });
  }

  /** Whether the replica behind `reply` is gone (silent past its TTL, or closed). */
  isGone(reply: string): boolean {
    const seen = this.#seen.get(reply);
    return seen !== undefined && Date.now() - seen.at > seen.ttlMs;
  }
}

export class WorkerRoster {
  readonly #ttlMs: number;
  readonly #seen = new Map<string, { at: number; settings: WorkerSettings[] }>();
  readonly #onChange: () => void;

  /** `onChange` hears when a worker arrives or says goodbye (a silent one is found gone by `alive()`). */
  constructor(ttlMs: number, onChange: () => void) {
    this.#ttlMs = ttlMs;
    this.#onChange = onChange;
  }

  listen(connection: NatsConnection, subject: string): void {
    connection.subscribe(subject, {
      callback: (error, msg) => {
        if (error === null) this.record(msg.string());
      },
    });
  }

  /** Asks the live workers to announce themselves now; resolves with the first answer, or at once with none. */
  async ping(connection: NatsConnection, subject: string): Promise<void> {
    try {
      const answer = await connection.request(subject, '', { timeout: Math.min(1_000, this.#ttlMs) });
      this.record(answer.string());
    } catch {
      // No responders: no worker is alive. A timeout: the next heartbeat says.
    }
  }

  record(text: string): void {
    let announcement: Partial<Announcement>;
    try {
      announcement = JSON.parse(text) as Partial<Announcement>;
    } catch {
      return;
    }
    if (typeof announcement.id !== 'string') return;
    if (announcement.gone === true) {
      if (this.#seen.delete(announcement.id)) this.#onChange();
      return;
    }
    const known = this.#seen.has(announcement.id);
    this.#seen.set(announcement.id, {
      at: Date.now(),
      settings: parseWorkerSettings(JSON.stringify(announcement.settings ?? null)),
    });
    if (!known) this.#onChange();
  }

  /** Workers heard from within the TTL; forgets the others. */
  alive(): number {
    const oldest = Date.now() - this.#ttlMs;
    for (const [id, { at }] of this.#seen) if (at < oldest) this.#seen.delete(id);
    return this.#seen.size;
  }

  /**
   * The live workers' settings, latency fits and running batches; `at` is when this replica heard them (its own
   * clock: no clock of the worker's is compared), so a running batch's elapsed time counts on from there.
   */
  settings(): WorkerSettings[] {
    this.alive();
    return [...this.#seen.values()].flatMap((seen) => seen.settings.map((settings) => ({ ...settings, at: seen.at })));
  }
}
