// A running batch's results, on the storage's result log named by the batch's id: one entry per finished request,
// a success (answered 2xx, for the output file) or a failure (anything else, for the error file). The log keeps the
// first entry of each custom_id, so a line run twice (after a crash, or by two replicas around a lost lease) still
// has exactly one result; the custom_ids read back at start are the requests already done.
import type { ResultEntry, ResultLogStorage } from '@microbatch/transport';
import { newId } from './atomic-json.js';

/** OpenAI's output line: the request's custom_id and the endpoint's answer, or an error with no answer. */
export interface ResultLine {
  readonly id: string;
  readonly custom_id: string;
  readonly response: { readonly status_code: number; readonly request_id: string; readonly body: unknown } | null;
  readonly error: { readonly code: string; readonly message: string } | null;
}

/**
 * The results of one batch, appended as its requests finish.
 *
 * @example
 * ```ts
 * const results = await BatchResults.open(storage.results, batch.id);
 * await results.answer('req-1', 200, body);
 * ```
 */
export class BatchResults {
  readonly #logs: ResultLogStorage;
  readonly #log: string;
  readonly #done: Set<string>;
  readonly #pending = new Set<Promise<unknown>>();

  private constructor(logs: ResultLogStorage, log: string, done: Set<string>) {
    this.#logs = logs;
    this.#log = log;
    this.#done = done;
  }

  /** The results already in log `log` (none for a new batch). */
  static async open(logs: ResultLogStorage, log: string): Promise<BatchResults> {
    const done = new Set<string>();
    for await (const entry of logs.read(log)) done.add(entry.customId);
    return new BatchResults(logs, log, done);
  }

  /** Whether `customId` had its line when the results were opened, or got it here since. */
  has(customId: string): boolean {
    return this.#done.has(customId);
  }

  /** How many successes and failures the log holds (every writer's, not only this one's). */
  async counts(): Promise<{ readonly completed: number; readonly failed: number }> {
    await this.settled();
    const { ok, failed } = await this.#logs.counts(this.#log);
    return { completed: ok, failed };
  }

  /** The log's entries (`ok`: the output file's, else the error file's), in the order they were written. */
  async *entries(ok: boolean): AsyncIterable<Uint8Array> {
    await this.settled();
    for await (const entry of this.#logs.read(this.#log)) {
      if (entry.ok === ok) yield Buffer.from(`${entry.line}\n`);
    }
  }

  /** Appends the endpoint's answer for `customId`: to the output when 2xx, else to the errors. */
  answer(customId: string, status: number, body: unknown): Promise<void> {
    const ok = status >= 200 && status < 300;
    return this.#append(ok, {
      id: newId('batch_req_'),
      custom_id: customId,
      response: { status_code: status, request_id: newId('req_'), body },
      error: null,
    });
  }

  /** Appends an error with no answer (the request never ran: `batch_expired`). */
  fail(customId: string, code: string, message: string): Promise<void> {
    return this.#append(false, {
      id: newId('batch_req_'),
      custom_id: customId,
      response: null,
      error: { code, message },
    });
  }

  /** Resolves once every append asked for so far is stored. */
  async settled(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled(this.#pending);
  }

  /** Removes the log (the batch's files hold its results now). */
  delete(): Promise<void> {
    return this.#logs.delete(this.#log);
  }

  async #append(ok: boolean, line: ResultLine): Promise<void> {
    if (this.#done.has(line.custom_id)) return;
    this.#done.add(line.custom_id);
    const entry: ResultEntry = { customId: line.custom_id, ok, line: JSON.stringify(line) };
    // A second entry for the custom_id (another replica wrote one first) is dropped by the log itself.
    const append = this.#logs.append(this.#log, entry);
    this.#pending.add(append);
    try {
      await append;
    } finally {
      this.#pending.delete(append);
    }
  }
}
