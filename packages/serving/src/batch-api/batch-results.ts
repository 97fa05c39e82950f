// A running batch's results on disk: one JSONL line appended per finished request, to `output.jsonl` (answered 2xx)
// or `errors.jsonl` (anything else), one append at a time. After a SIGKILL the files are read back: a last line cut
// short is cut off (its request runs again), and the custom_ids present are the requests already done, so a resumed
// batch writes each custom_id exactly once.
import { appendFile, open, readFile, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { newId } from './atomic-json.js';

/** OpenAI's output line: the request's custom_id and the endpoint's answer, or an error with no answer. */
export interface ResultLine {
  readonly id: string;
  readonly custom_id: string;
  readonly response: { readonly status_code: number; readonly request_id: string; readonly body: unknown } | null;
  readonly error: { readonly code: string; readonly message: string } | null;
}

/**
 * The output and error files of one batch, appended as its requests finish.
 *
 * @example
 * ```ts
 * const results = await BatchResults.open(workDir);
 * await results.append('req-1', { status: 200, body });
 * ```
 */
export class BatchResults {
  readonly #outputPath: string;
  readonly #errorPath: string;
  readonly #done: Set<string>;
  #completed: number;
  #failed: number;
  #appending: Promise<void> = Promise.resolve();

  private constructor(dir: string, done: Set<string>, completed: number, failed: number) {
    this.#outputPath = join(dir, 'output.jsonl');
    this.#errorPath = join(dir, 'errors.jsonl');
    this.#done = done;
    this.#completed = completed;
    this.#failed = failed;
  }

  /** The results already in `dir` (none for a new batch), a torn last line removed. */
  static async open(dir: string): Promise<BatchResults> {
    const done = new Set<string>();
    const completed = await readDone(join(dir, 'output.jsonl'), done);
    const failed = await readDone(join(dir, 'errors.jsonl'), done);
    return new BatchResults(dir, done, completed, failed);
  }

  /** Whether `customId` already has its line. */
  has(customId: string): boolean {
    return this.#done.has(customId);
  }

  get completed(): number {
    return this.#completed;
  }

  get failed(): number {
    return this.#failed;
  }

  get outputPath(): string {
    return this.#outputPath;
  }

  get errorPath(): string {
    return this.#errorPath;
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

  /** Resolves once every append asked for so far is on disk. */
  settled(): Promise<void> {
    return this.#appending;
  }

  #append(ok: boolean, line: ResultLine): Promise<void> {
    if (this.#done.has(line.custom_id)) return this.#appending;
    this.#done.add(line.custom_id);
    const path = ok ? this.#outputPath : this.#errorPath;
    const text = `${JSON.stringify(line)}\n`;
    this.#appending = this.#appending.then(async () => {
      await appendFile(path, text);
      if (ok) this.#completed += 1;
      else this.#failed += 1;
    });
    return this.#appending;
  }
}

/** Adds the custom_ids of the result file at `path` to `done` (cutting a torn last line off); its line count. */
async function readDone(path: string, done: Set<string>): Promise<number> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') {
      await (await open(path, 'a')).close();
      return 0;
    }
    throw error;
  }
  const end = text.lastIndexOf('\n') + 1;
  if (end < text.length) await truncate(path, Buffer.byteLength(text.slice(0, end)));
  let count = 0;
  for (const line of text.slice(0, end).split('\n')) {
    if (line === '') continue;
    const { custom_id: customId } = JSON.parse(line) as ResultLine;
    done.add(customId);
    count += 1;
  }
  return count;
}
