// Runs batches on spare capacity: each batch is validated, then its lines are fed to the endpoints (the service's
// batchers at the lowest priority) only while the spare-capacity gate says the server is idle but for them
// (`spare-capacity.ts`); lines running when an interactive request arrives are preempted by the gate and fed again
// later. Results are appended as lines finish. A batch is run by the process holding its lease (renewed
// every third of its time; a runner that loses it stops feeding that batch); on a shared store every runner looks
// for unfinished batches whose lease lapsed and takes them up, so a batch outlives the replica that started it.
import type { BatchStorage } from '@microbatch/transport';
import { BatchResults } from './batch-results.js';
import { type BatchInputBounds, type BatchRequestLine, checkLine, readLines, validateInput } from './batch-input.js';
import { type BatchEndpoint, type BatchObject, type BatchStore, ENDED, type StoredBatch } from './batch-store.js';
import type { LineEndpoint } from './batch-lines.js';
import type { FileStore } from './file-store.js';
import type { SpareCapacity } from './spare-capacity.js';
import { unixSeconds } from './atomic-json.js';
import { finalizeBatch } from './batch-finalize.js';
import { KeyedSerial } from './keyed-serial.js';

/** What a batch runner reads and writes. */
export interface BatchRunnerParts {
  readonly files: FileStore;
  readonly batches: BatchStore;
  /** The storage's result logs and leases (`shared`: other processes run batches of the same store). */
  readonly storage: Pick<BatchStorage, 'results' | 'leases' | 'shared'>;
  /** Who this runner is, as its leases name it (unique per process). */
  readonly holder: string;
  /**
   * How long a batch's lease lasts unrenewed: the runner renews it every third of this, and on a shared store looks
   * for lapsed leases this often.
   */
  readonly leaseMs: number;
  /** The endpoints this server answers batch lines of. */
  readonly endpoints: Partial<Record<BatchEndpoint, LineEndpoint>>;
  readonly bounds: BatchInputBounds;
  /** When a line may be fed, and the preemption of running lines when interactive work arrives. */
  readonly gate: SpareCapacity;
  /** Where a batch's unexpected failure is reported (never sent to a client). */
  readonly onError: (error: unknown) => void;
}

/** Why a batch's feeding stopped before its last line. */
type Stop = 'expired' | 'cancelled' | 'stopped' | 'lost';

/** How long the feeder waits before looking for room again, or before retrying a line refused for overload. */
const ROOM_POLL_MS = 5;
const RETRY_MS = 200;
/** How often a running batch's counts are saved (and a cancel asked for on another replica read). */
const SAVE_EVERY_MS = 500;

/**
 * The runner of every batch of one store, in this process.
 *
 * @example
 * ```ts
 * const runner = new BatchRunner(parts);
 * await runner.resume(); // batches a previous process left running (and, on a broker, any whose runner died)
 * runner.start(batch.id);
 * ```
 */
export class BatchRunner {
  readonly #parts: BatchRunnerParts;
  readonly #running = new Map<string, Promise<void>>();
  readonly #cancelled = new Set<string>();
  /** Batches whose lease this runner lost: fed no more, saved and finalized by the runner that holds it now. */
  readonly #lost = new Set<string>();
  readonly #writes = new KeyedSerial();
  #inFlight = 0;
  #closed = false;
  #scanTimer: ReturnType<typeof setInterval> | undefined;

  constructor(parts: BatchRunnerParts) {
    this.#parts = parts;
  }

  /**
   * Starts every batch of the store that has not ended (after a restart). On a shared store it then looks again
   * every `leaseMs`: a batch whose runner died (its lease lapsed) is taken up here.
   */
  async resume(): Promise<void> {
    await this.#scan();
    if (this.#parts.storage.shared && this.#scanTimer === undefined && !this.#closed) {
      this.#scanTimer = setInterval(() => {
        this.#scan().catch(this.#parts.onError);
      }, this.#parts.leaseMs);
      this.#scanTimer.unref();
    }
  }

  /** Runs batch `id` if no process runs it (once: a batch already running here is left as it is). */
  start(id: string): void {
    if (this.#closed || this.#running.has(id)) return;
    const run = this.#run(id)
      .catch((error: unknown) => this.#parts.onError(error))
      .finally(() => this.#running.delete(id));
    this.#running.set(id, run);
  }

  /**
   * Stops feeding batch `id`, wherever it runs: lines running finish, then it is finalized as cancelled. Resolves
   * with the batch as it is then (`cancelling`).
   */
  async cancel(stored: StoredBatch): Promise<StoredBatch> {
    const { id } = stored.batch;
    this.#cancelled.add(id);
    // The mark first: the runner (here or on another replica) reads it before each save, so its next save cannot
    // overwrite the `cancelling` written below with the status it read before.
    await this.#parts.batches.markCancel(id);
    // Read again under the batch's write order: a batch that ended meanwhile stays as it ended.
    const cancelling = await this.#writes.run(id, async () => {
      const current = (await this.#parts.batches.get(id)) ?? stored;
      if (ENDED.has(current.batch.status) || current.batch.status === 'cancelling') return current;
      const now = unixSeconds(this.#parts.batches.now());
      const next: StoredBatch = { ...current, batch: { ...current.batch, status: 'cancelling', cancelling_at: now } };
      await this.#parts.batches.save(next);
      return next;
    });
    // Not running here: run it if no process holds its lease (one that does sees the mark).
    if (!ENDED.has(cancelling.batch.status) && !this.#running.has(id)) this.start(id);
    return cancelling;
  }

  /** Lines running now, across every batch. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Lines preempted for interactive requests so far (each fed again later): work thrown away. */
  get preempted(): number {
    return this.#parts.gate.preempted;
  }

  /** Stops feeding every batch (they stay resumable: their leases are given up) and waits for the lines running. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#scanTimer !== undefined) clearInterval(this.#scanTimer);
    await Promise.allSettled(this.#running.values());
    this.#parts.gate.close();
  }

  async #scan(): Promise<void> {
    if (this.#closed) return;
    for (const stored of await this.#parts.batches.list()) {
      if (!ENDED.has(stored.batch.status)) this.start(stored.batch.id);
    }
  }

  /** Runs batch `id` under its lease: taken first (else another process runs it), renewed, given up at the end. */
  async #run(id: string): Promise<void> {
    const { holder, leaseMs, storage, onError } = this.#parts;
    const first = await this.#parts.batches.get(id);
    if (first === undefined || ENDED.has(first.batch.status)) return;
    if (!(await storage.leases.acquire(id, holder, leaseMs))) return;
    this.#lost.delete(id);
    let renewing: Promise<void> = Promise.resolve();
    const renew = setInterval(
      () => {
        renewing = this.#renew(id);
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    renew.unref();
    try {
      // Read again under the lease: the runner before this one may have moved it on meanwhile.
      const stored = await this.#parts.batches.get(id);
      if (stored !== undefined && !ENDED.has(stored.batch.status)) await this.#runLeased(stored);
    } finally {
      clearInterval(renew);
      await renewing;
      // Given up at once (not left to lapse), so a batch stopped by a shutdown is taken up by another replica now.
      if (!this.#lost.delete(id)) await storage.leases.release(id, holder).catch(onError);
    }
  }

  /** Renews batch `id`'s lease (lost: its feeding stops) and reads its cancel mark (set on any replica). */
  async #renew(id: string): Promise<void> {
    const { holder, leaseMs, storage, onError } = this.#parts;
    try {
      if (!(await storage.leases.acquire(id, holder, leaseMs))) this.#lost.add(id);
      else if (await this.#parts.batches.cancelMarked(id)) this.#cancelled.add(id);
    } catch (error) {
      // A broker that does not answer: the lease lapses unless a later renewal gets through; nothing stops here.
      onError(error);
    }
  }

  async #runLeased(first: StoredBatch): Promise<void> {
    const { id } = first.batch;
    let stored = first;
    if (stored.batch.status === 'validating') {
      stored = await this.#validate(stored);
      if (stored.batch.status === 'failed') return;
    }
    const results = await BatchResults.open(this.#parts.storage.results, id);
    if (stored.batch.status === 'in_progress') {
      const outcome = await this.#feed(stored, results);
      // The runner holding the lease now saves and finalizes it: a save from here would undo its writes.
      if (this.#lost.has(id)) return;
      if (outcome === 'stopped') {
        await this.#save(stored, results, {});
        return;
      }
      stored = await this.#save(stored, results, { status: outcome === 'cancelled' ? 'cancelling' : 'finalizing' });
    }
    if (this.#lost.has(id)) return;
    await this.#finalize(stored, results);
  }

  async #validate(stored: StoredBatch): Promise<StoredBatch> {
    const { batch } = stored;
    const input = await this.#parts.files.get(batch.input_file_id);
    const source = input === undefined ? undefined : await this.#parts.files.openContent(input.file.id);
    const now = unixSeconds(this.#parts.batches.now());
    const checked =
      source === undefined
        ? {
            errors: [
              { code: 'input_file_missing', message: 'The input file was deleted', param: 'input_file_id', line: null },
            ],
          }
        : await validateInput(source, batch.endpoint, this.#parts.bounds);
    if ('errors' in checked) {
      return this.#put({
        ...stored,
        batch: { ...batch, status: 'failed', failed_at: now, errors: { object: 'list', data: checked.errors } },
      });
    }
    return this.#put({
      ...stored,
      batch: {
        ...batch,
        status: 'in_progress',
        in_progress_at: now,
        request_counts: { total: checked.total, completed: 0, failed: 0 },
      },
    });
  }

  /**
   * Feeds the batch's lines not yet done, the preempted ones again before the next of the file; what ended the
   * feeding (`stopped` too when its lease was lost).
   */
  async #feed(stored: StoredBatch, results: BatchResults): Promise<'done' | Exclude<Stop, 'lost'>> {
    const { batch } = stored;
    const endpoint = this.#parts.endpoints[batch.endpoint];
    const source = await this.#inputOf(stored);
    // A cancel asked on another replica while this one validated (or before it took the batch up).
    if (await this.#parts.batches.cancelMarked(batch.id)) this.#cancelled.add(batch.id);
    const running = new Set<Promise<void>>();
    const stop = (): Exclude<Stop, 'lost'> | undefined => {
      if (this.#closed || this.#lost.has(batch.id)) return 'stopped';
      if (this.#cancelled.has(batch.id)) return 'cancelled';
      if (this.#parts.batches.now() >= stored.expiresAtMs) return 'expired';
      return undefined;
    };
    let lastSave = this.#parts.batches.now();
    let ended: Exclude<Stop, 'lost'> | undefined;
    if (source !== undefined && endpoint !== undefined) {
      const fresh = this.#unanswered(source, batch.endpoint, results);
      const preempted: BatchRequestLine[] = [];
      let fileDone = false;
      try {
        for (;;) {
          if (fileDone && preempted.length === 0) {
            // Every line fed: wait for one running to end (a preempted one comes back to be fed again).
            if (running.size === 0) break;
            await Promise.race(running);
            continue;
          }
          ended = await this.#waitForRoom(stop);
          if (ended !== undefined) break;
          let line = preempted.shift();
          if (line === undefined) {
            const next = await fresh.next();
            if (next.done === true) {
              fileDone = true;
              continue;
            }
            line = next.value;
          }
          const fed = line;
          this.#inFlight += 1;
          const one = this.#runLine(endpoint, fed.customId, fed.body, results, stop)
            .then((outcome) => {
              if (outcome === 'preempted') preempted.push(fed);
            })
            .finally(() => {
              this.#inFlight -= 1;
              running.delete(one);
            });
          running.add(one);
          if (this.#parts.batches.now() - lastSave > SAVE_EVERY_MS && !this.#lost.has(batch.id)) {
            lastSave = this.#parts.batches.now();
            await this.#save(stored, results, {});
          }
        }
      } finally {
        await fresh.return(undefined);
      }
    }
    await Promise.all(running);
    await results.settled();
    return ended ?? stop() ?? 'done';
  }

  /** The batch's input file's bytes (`undefined` once it was deleted). */
  async #inputOf(stored: StoredBatch): Promise<AsyncIterable<Uint8Array> | undefined> {
    const input = await this.#parts.files.get(stored.batch.input_file_id);
    return input === undefined ? undefined : this.#parts.files.openContent(input.file.id);
  }

  /** The lines of the input file that are valid and have no result yet, in order. */
  async *#unanswered(
    source: AsyncIterable<Uint8Array>,
    endpoint: BatchEndpoint,
    results: BatchResults,
  ): AsyncGenerator<BatchRequestLine> {
    const seen = new Set<string>();
    for await (const raw of readLines(source, this.#parts.bounds.maxLineBytes)) {
      const line = checkLine(raw, endpoint, seen, this.#parts.bounds.maxLineBytes);
      if ('code' in line || results.has(line.customId)) continue;
      yield line;
    }
  }

  /** Resolves once a line may be fed (or with why feeding stops). */
  async #waitForRoom(stop: () => 'expired' | 'cancelled' | 'stopped' | undefined) {
    for (;;) {
      const ended = stop();
      if (ended !== undefined) return ended;
      if (this.#parts.gate.mayFeed(this.#inFlight)) return undefined;
      await sleep(ROOM_POLL_MS);
    }
  }

  /**
   * Runs one line to its answer. A refusal for overload or shutdown (503) is not the line's answer: it is tried again
   * while the batch goes on, and left undone (to run after a restart) when it stops. A line preempted by the gate is
   * not answered either: `'preempted'`, to be fed again.
   */
  async #runLine(
    endpoint: LineEndpoint,
    customId: string,
    body: Readonly<Record<string, unknown>>,
    results: BatchResults,
    stop: () => 'expired' | 'cancelled' | 'stopped' | undefined,
  ): Promise<'answered' | 'preempted' | 'left'> {
    if (body.stream === true) {
      await results.answer(customId, 400, {
        error: {
          message: '`stream` is not supported in a batch',
          type: 'invalid_request_error',
          param: 'stream',
          code: 'INVALID_INPUT',
        },
      });
      return 'answered';
    }
    for (;;) {
      const lease = this.#parts.gate.hold();
      const answer = await endpoint(body, lease.signal).finally(() => lease.release());
      if (answer === undefined) return 'preempted';
      if (answer.status !== 503) {
        await results.answer(customId, answer.status, answer.body);
        return 'answered';
      }
      // The service is closing (the server shuts down): nothing more is fed; the batch resumes at the next start.
      if ((answer.body as { error?: { code?: unknown } } | null)?.error?.code === 'CLOSED') {
        this.#closed = true;
        return 'left';
      }
      if (stop() !== undefined) return 'left';
      await sleep(RETRY_MS);
    }
  }

  async #finalize(stored: StoredBatch, results: BatchResults): Promise<void> {
    const { files, batches, bounds } = this.#parts;
    await finalizeBatch(
      {
        files,
        batches,
        maxLineBytes: bounds.maxLineBytes,
        input: (batch) => this.#inputOf(batch),
        put: (batch) => this.#put(batch),
      },
      stored,
      results,
    );
    this.#cancelled.delete(stored.batch.id);
  }

  /** Saves the batch's counts (and a new status, stamped) as they are now. */
  async #save(
    stored: StoredBatch,
    results: BatchResults,
    change: { readonly status?: 'finalizing' | 'cancelling' },
  ): Promise<StoredBatch> {
    const { id } = stored.batch;
    // A cancel asked for on any replica shows at the next save, whatever this save was for.
    if (!this.#cancelled.has(id) && (await this.#parts.batches.cancelMarked(id))) this.#cancelled.add(id);
    const counts = await results.counts();
    const now = unixSeconds(this.#parts.batches.now());
    const cancelling = this.#cancelled.has(id) && stored.batch.status === 'in_progress';
    const batch: BatchObject = {
      ...stored.batch,
      ...(cancelling ? { status: 'cancelling', cancelling_at: stored.batch.cancelling_at ?? now } : {}),
      request_counts: { total: stored.batch.request_counts.total, completed: counts.completed, failed: counts.failed },
      ...(change.status === 'finalizing' ? { status: 'finalizing', finalizing_at: now } : {}),
      ...(change.status === 'cancelling'
        ? { status: 'cancelling', cancelling_at: stored.batch.cancelling_at ?? now }
        : {}),
    };
    return this.#put({ ...stored, batch });
  }

  #put(stored: StoredBatch): Promise<StoredBatch> {
    return this.#writes.run(stored.batch.id, async () => {
      await this.#parts.batches.save(stored);
      return stored;
    });
  }
}

const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });
