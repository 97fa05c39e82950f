// The fleet under chaos: web replicas (`microbatch serve --queue`) and model workers (`microbatch worker --queue`) as
// real CLI processes over one broker. Each process start is an incarnation; the fleet remembers which ones the fault
// loop killed, so an exit nobody asked for, and the requests of a replica that did not stay up, are told apart.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ChildHandle, startProcess, startServerProcess } from '@microbatch/test-kit';

const BIN = fileURLToPath(new URL('../../../packages/cli/bin/microbatch.js', import.meta.url));
const MODEL_DIR = fileURLToPath(new URL('../../../models/tinystories-656k', import.meta.url));
/**
 * The CLI's lines, as pino writes them off a terminal. A replica is up once it listens: its `ready` line waits for a
 * live worker, and until then it answers 503 at once, which is part of what the run checks.
 */
const REPLICA_LISTENING = /"url":"(http:[^"]+)","msg":"listening"/;
const WORKER_READY = /"msg":"worker ready"/;
/** Model loads on a machine 2-3x slower, other engineers' tests beside it: a hang guard only. */
const START_TIMEOUT_MS = 120_000;

export type Role = 'replica' | 'worker';

/** One start of one member of the fleet. */
export interface Incarnation {
  /** `replica-express#2`: the member and how many times it started. */
  readonly id: string;
  readonly member: string;
  readonly role: Role;
  readonly handle: ChildHandle;
  /** A replica's URL. */
  readonly url: string | undefined;
  readonly startedAt: number;
  /** When it stopped being up: killed by the fault loop, exited by itself, or stopped at the end. */
  downAt: number | undefined;
  /** Whether the fault loop (or the end of the run) ended it, so its exit is expected. */
  expectedExit: boolean;
}

/** An exit that the fault loop did not cause. */
export interface UnexpectedExit {
  readonly id: string;
  readonly at: number;
  readonly code: number | null;
  readonly signal: string | null;
  /** The end of what it printed. */
  readonly tail: string;
}

/** What the fleet runs. */
export interface FleetOptions {
  readonly queueUrl: string;
  /** The queue's name: the bundled model's. */
  readonly queue: string;
  /** One replica per framework. */
  readonly frameworks: readonly string[];
  readonly workers: number;
  /** The workers' `--claim-idle-ms`: how long a stopped worker's entries wait to be taken over. */
  readonly claimIdleMs: number;
  /** Told of each exit nobody asked for (the fleet restarts the member, so the run goes on with its capacity). */
  readonly onUnexpectedExit: (exit: UnexpectedExit) => void;
  /** Told when a member that exited by itself is back. */
  readonly log: (line: string) => void;
}

/**
 * Starts and restarts the members of the fleet and keeps every incarnation for the checks.
 *
 * @example
 * ```ts
 * const fleet = new Fleet({ queueUrl: broker.url, queue: 'tinystories-656k', frameworks: ['express', 'fastify'], workers: 2, claimIdleMs: 2_000, onUnexpectedExit: console.log });
 * await fleet.start();
 * await fleet.killAndRestart('worker-1');
 * ```
 */
export class Fleet {
  readonly #options: FleetOptions;
  readonly #current = new Map<string, Incarnation>();
  readonly #all: Incarnation[] = [];
  #stopping = false;

  constructor(options: FleetOptions) {
    this.#options = options;
  }

  /** The members' names: `replica-<framework>` and `worker-<n>`. */
  get members(): string[] {
    return [
      ...this.#options.frameworks.map((framework) => `replica-${framework}`),
      ...Array.from({ length: this.#options.workers }, (_, index) => `worker-${index + 1}`),
    ];
  }

  /**
   * Writes what each incarnation printed to `<dir>/<id>.log`, for the report's examples to be followed up.
   */
  writeLogs(dir: string): void {
    mkdirSync(dir, { recursive: true });
    for (const one of this.#all) writeFileSync(join(dir, `${one.id.replace('#', '.')}.log`), one.handle.output());
  }

  /** Every incarnation so far, in start order. */
  get incarnations(): readonly Incarnation[] {
    return this.#all;
  }

  /** The replicas up now. */
  liveReplicas(): Incarnation[] {
    return [...this.#current.values()].filter((one) => one.role === 'replica' && one.downAt === undefined);
  }

  async start(): Promise<void> {
    // Workers first, one at a time: two model loads at once only slow each other on a shared machine.
    for (const member of this.members.filter((name) => name.startsWith('worker-'))) await this.#spawn(member);
    await Promise.all(this.members.filter((name) => name.startsWith('replica-')).map((name) => this.#spawn(name)));
  }

  /** SIGKILLs the member's current incarnation, then starts it again and waits until it is up (listening, ready). */
  async killAndRestart(member: string): Promise<{ killed: string; started: string }> {
    const killed = this.#live(member);
    killed.expectedExit = true;
    killed.downAt = Date.now();
    killed.handle.child.kill('SIGKILL');
    await killed.handle.exited;
    const started = await this.#spawn(member);
    return { killed: killed.id, started: started.id };
  }

  /** SIGSTOPs the member for `pauseMs`, then SIGCONTs it: frozen, not gone (its connections stay open). */
  async pause(member: string, pauseMs: number): Promise<string> {
    const paused = this.#live(member);
    paused.handle.child.kill('SIGSTOP');
    try {
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    } finally {
      paused.handle.child.kill('SIGCONT');
    }
    return paused.id;
  }

  /** Stops every process (SIGTERM, then SIGKILL after a grace period); their exits are expected. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all(
      [...this.#current.values()].map(async (one) => {
        one.expectedExit = true;
        one.downAt ??= Date.now();
        await one.handle.stop(10_000);
      }),
    );
  }

  #live(member: string): Incarnation {
    const one = this.#current.get(member);
    if (one === undefined || one.downAt !== undefined) throw new Error(`${member} is not up`);
    return one;
  }

  async #spawn(member: string): Promise<Incarnation> {
    const role: Role = member.startsWith('replica-') ? 'replica' : 'worker';
    const generation = this.#all.filter((one) => one.member === member).length + 1;
    const { queueUrl, queue, claimIdleMs } = this.#options;
    let handle: ChildHandle;
    let url: string | undefined;
    if (role === 'replica') {
      const framework = member.slice('replica-'.length);
      const args = [BIN, 'serve', '--queue', queueUrl, '--model', queue, '--framework', framework, '--port', '0'];
      const server = await startServerProcess({ args, ready: REPLICA_LISTENING, readyTimeoutMs: START_TIMEOUT_MS });
      handle = server;
      url = server.url;
    } else {
      const args = [BIN, 'worker', '--queue', queueUrl, '--model', MODEL_DIR, '--workers', '1', '--threads', '1'];
      handle = startProcess({ args: [...args, '--claim-idle-ms', String(claimIdleMs)] });
      await handle.waitForOutput(WORKER_READY, START_TIMEOUT_MS);
    }
    const incarnation: Incarnation = {
      id: `${member}#${generation}`,
      member,
      role,
      handle,
      url,
      startedAt: Date.now(),
      downAt: undefined,
      expectedExit: false,
    };
    this.#current.set(member, incarnation);
    this.#all.push(incarnation);
    void handle.exited.then((exit) => this.#onExit(incarnation, exit.code, exit.signal));
    return incarnation;
  }

  #onExit(incarnation: Incarnation, code: number | null, signal: string | null): void {
    incarnation.downAt ??= Date.now();
    if (incarnation.expectedExit) return;
    this.#options.onUnexpectedExit({
      id: incarnation.id,
      at: incarnation.downAt,
      code,
      signal,
      tail: incarnation.handle.output().slice(-8_000), // past a native stack, to its JS error
    });
    // The run goes on with the fleet's capacity: the member comes back, as a supervisor would bring it back.
    if (!this.#stopping && this.#current.get(incarnation.member) === incarnation) {
      this.#spawn(incarnation.member).then(
        (started) => this.#options.log(`${started.id} started after ${incarnation.id} exited by itself`),
        (error: unknown) =>
          this.#options.onUnexpectedExit({
            id: `${incarnation.member}#restart`,
            at: Date.now(),
            code: null,
            signal: null,
            tail: String(error).slice(-2_000),
          }),
      );
    }
  }
}
