// Runs batches on spare capacity: each batch is validated, then its lines are fed to the endpoints (the service's
// batchers at the lowest priority) only while the spare-capacity gate says the server is idle but for them
// (`spare-capacity.ts`); lines running when an interactive request arrives are preempted by the gate and fed again
// later. Results are appended as lines finish; a batch not ended when the process stops is resumed by the next one
// on the same data directory.
import { BatchResults } from './batch-results.js';
import { type BatchInputBounds, type BatchRequestLine, checkLine, readLines, validateInput } from './batch-input.js';
import { type BatchEndpoint, type BatchObject, type BatchStore, ENDED, type StoredBatch } from './batch-store.js';
import type { LineEndpoint } from './batch-lines.js';
import type { FileStore } from './file-store.js';
import type { SpareCapacity } from './spare-capacity.js';
import { unixSeconds } from './atomic-json.js';

/** What a batch runner reads and writes. */
export interface BatchRunnerParts {
  readonly files: FileStore;
  readonly batches: BatchStore;
  /** The endpoints this server answers batch lines of. */
  readonly endpoints: Partial<Record<BatchEndpoint, LineEndpoint>>;
  readonly bounds: BatchInputBounds;
  /** When a line may be fed, and the preemption of running lines when interactive work arrives. */
  readonly gate: SpareCapacity;
  /** Where a batch's unexpected failure is reported (never sent to a client). */
  readonly onError: (error: unknown) => void;
}

/** How long the feeder waits before looking for room again, or before retrying a line refused for overload. */
const ROOM_POLL_MS = 5;
const RETRY_MS = 200;

/**
 * The runner of every batch of one store.
 *
 * @example
 * ```ts
 * const runner = new BatchRunner(parts);
 * runner.resume(); // batches a previous process left running
 * runner.start(batch.id);
 * ```
 */
export class BatchRunner {
  readonly #parts: BatchRunnerParts;
  readonly #running = new Map<string, Promise<void>>();
  readonly #cancelled = new Set<string>();
  readonly #writes = new Map<string, Promise<void>>();
  #inFlight = 0;
  #closed = false;

  constructor(parts: BatchRunnerParts) {
    this.#parts = parts;
  }

  /** Starts every batch of the store that has not ended (after a restart). */
  async resume(): Promise<void> {
    for (const stored of await this.#parts.batches.list()) {
      if (!ENDED.has(stored.batch.status)) this.start(stored.batch.id);
    }
  }

  /** Runs batch `id` (once: a batch already running is left as it is). */
  start(id: string): void {
    if (this.#closed || this.#running.has(id)) return;
    const run = this.#run(id)
      .catch((error: unknown) => this.#parts.onError(error))
      .finally(() => this.#running.delete(id));
    this.#running.set(id, run);
  }

  /**
   * Stops feeding batch `id`: lines running finish, then it is finalized as cancelled. Resolves with the batch as
   * it is then (`cancelling`).
   */
  async cancel(stored: StoredBatch): Promise<StoredBatch> {
    const { id } = stored.batch;
    this.#cancelled.add(id);
    // Read again under the batch's write order: a batch that ended meanwhile stays as it ended.
    const cancelling = await this.#serial(id, async () => {
      const current = (await this.#parts.batches.get(id)) ?? stored;
      if (ENDED.has(current.batch.status) || current.batch.status === 'cancelling') return current;
      const now = unixSeconds(this.#parts.batches.now());
      const next: StoredBatch = { ...current, batch: { ...current.batch, status: 'cancelling', cancelling_at: now } };
      await this.#parts.batches.save(next);
      return next;
    });
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

  /** Stops feeding every batch (they stay resumable) and waits for the lines running. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled(this.#running.values());
    this.#parts.gate.close();
  }

  async #run(id: string): Promise<void> {
    let stored = await this.#parts.batches.get(id);
    if (stored === undefined || ENDED.has(stored.batch.status)) return;
    if (stored.batch.status === 'validating') {
      stored = await this.#validate(stored);
      if (stored.batch.status === 'failed') return;
    }
    const results = await BatchResults.open(this.#parts.batches.workDir(id));
    if (stored.batch.status === 'in_progress') {
      const outcome = await this.#feed(stored, results);
      if (outcome === 'stopped') {
        await this.#save(stored, results, {});
        return;
      }
      stored = await this.#save(
        stored,
        results,
        outcome === 'expired'
          ? { status: 'finalizing' }
          : outcome === 'cancelled'
            ? { status: 'cancelling' }
            : { status: 'finalizing' },
      );
    }
    await this.#finalize(stored, results);
  }

  async #validate(stored: StoredBatch): Promise<StoredBatch> {
    const { batch } = stored;
    const input = await this.#parts.files.get(batch.input_file_id);
    const now = unixSeconds(this.#parts.batches.now());
    const checked =
      input === undefined
        ? {
            errors: [
              { code: 'input_file_missing', message: 'The input file was deleted', param: 'input_file_id', line: null },
            ],
          }
        : await validateInput(this.#parts.files.contentPath(input.file.id), batch.endpoint, this.#parts.bounds);
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
   * feeding.
   */
  async #feed(stored: StoredBatch, results: BatchResults): Promise<'done' | 'expired' | 'cancelled' | 'stopped'> {
    const { batch } = stored;
    const endpoint = this.#parts.endpoints[batch.endpoint];
    const input = await this.#parts.files.get(batch.input_file_id);
    const running = new Set<Promise<void>>();
    const stop = (): 'expired' | 'cancelled' | 'stopped' | undefined => {
      if (this.#closed) return 'stopped';
      if (this.#cancelled.has(batch.id)) return 'cancelled';
      if (this.#parts.batches.now() >= stored.expiresAtMs) return 'expired';
      return undefined;
    };
    let lastSave = this.#parts.batches.now();
    let ended: 'expired' | 'cancelled' | 'stopped' | undefined;
    if (input !== undefined && endpoint !== undefined) {
      const fresh = this.#unanswered(this.#parts.files.contentPath(input.file.id), batch.endpoint, results);
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
          if (this.#parts.batches.now() - lastSave > 500) {
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

  /** The lines of the input file that are valid and have no result yet, in order. */
  async *#unanswered(path: string, endpoint: BatchEndpoint, results: BatchResults): AsyncGenerator<BatchRequestLine> {
    const seen = new Set<string>();
    for await (const raw of readLines(path, this.#parts.bounds.maxLineBytes)) {
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
    const { files } = this.#parts;
    let current = stored;
    const expiring =
      current.batch.status === 'finalizing' &&
      this.#parts.batches.now() >= current.expiresAtMs &&
      results.completed + results.failed < current.batch.request_counts.total;
    if (expiring) {
      // OpenAI's behaviour: the requests that never ran get `batch_expired` in the error file.
      const input = await files.get(current.batch.input_file_id);
      if (input !== undefined) {
        const seen = new Set<string>();
        for await (const raw of readLines(files.contentPath(input.file.id), this.#parts.bounds.maxLineBytes)) {
          const line = checkLine(raw, current.batch.endpoint, seen, this.#parts.bounds.maxLineBytes);
          if ('code' in line || results.has(line.customId)) continue;
          void results.fail(
            line.customId,
            'batch_expired',
            'This request could not be executed before the completion window expired.',
          );
        }
        await results.settled();
      }
    }
    // File ids chosen and recorded before the move, so a restart mid-finalization finishes under the same ids.
    const plan = current.plannedFiles ?? { output: files.newId(), errors: files.newId() };
    current = await this.#put({ ...current, plannedFiles: plan });
    const owner = current.owner;
    const output =
      results.completed > 0 || (await exists(files, plan.output))
        ? await files.adopt(plan.output, results.outputPath, {
            filename: `${current.batch.id}_output.jsonl`,
            purpose: 'batch_output',
            owner,
          })
        : undefined;
    const errors =
      results.failed > 0 || (await exists(files, plan.errors))
        ? await files.adopt(plan.errors, results.errorPath, {
            filename: `${current.batch.id}_error.jsonl`,
            purpose: 'batch_output',
            owner,
          })
        : undefined;
    const now = unixSeconds(this.#parts.batches.now());
    const wasCancelling = current.batch.status === 'cancelling';
    const status = wasCancelling ? 'cancelled' : expiring ? 'expired' : 'completed';
    await this.#put({
      ...current,
      batch: {
        ...current.batch,
        status,
        output_file_id: output?.file.id ?? null,
        error_file_id: errors?.file.id ?? null,
        request_counts: {
          total: current.batch.request_counts.total,
          completed: results.completed,
          failed: results.failed,
        },
        ...(status === 'cancelled'
          ? { cancelled_at: now }
          : status === 'expired'
            ? { expired_at: now }
            : { completed_at: now }),
      },
    });
    this.#cancelled.delete(current.batch.id);
  }

  /** Saves the batch's counts (and a new status, stamped) as they are now. */
  #save(
    stored: StoredBatch,
    results: BatchResults,
    change: { readonly status?: 'finalizing' | 'cancelling' },
  ): Promise<StoredBatch> {
    const now = unixSeconds(this.#parts.batches.now());
    // A cancel asked for while the batch runs shows at once, whatever this save was for.
    const cancelling = this.#cancelled.has(stored.batch.id) && stored.batch.status === 'in_progress';
    const batch: BatchObject = {
      ...stored.batch,
      ...(cancelling ? { status: 'cancelling', cancelling_at: stored.batch.cancelling_at ?? now } : {}),
      request_counts: {
        total: stored.batch.request_counts.total,
        completed: results.completed,
        failed: results.failed,
      },
      ...(change.status === 'finalizing' ? { status: 'finalizing', finalizing_at: now } : {}),
      ...(change.status === 'cancelling'
        ? { status: 'cancelling', cancelling_at: stored.batch.cancelling_at ?? now }
        : {}),
    };
    return this.#put({ ...stored, batch });
  }

  #put(stored: StoredBatch): Promise<StoredBatch> {
    return this.#serial(stored.batch.id, async () => {
      await this.#parts.batches.save(stored);
      return stored;
    });
  }

  /** Runs `write` after every write of batch `id` asked for before it (one writer at a time per batch). */
  #serial<T>(id: string, write: () => Promise<T>): Promise<T> {
    const previous = this.#writes.get(id) ?? Promise.resolve();
    const next = previous.then(write, write);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    this.#writes.set(id, settled);
    void settled.then(() => {
      if (this.#writes.get(id) === settled) this.#writes.delete(id);
    });
    return next;
  }
}

async function exists(files: FileStore, id: string): Promise<boolean> {
  return (await files.get(id)) !== undefined;
}

const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });
