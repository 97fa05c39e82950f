// Small disk helpers the batch API's stores share: a JSON record written whole or not at all (temp file + rename,
// so a process killed mid-write leaves the previous record), and ids that are hard to guess.
import { randomBytes } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';

/**
 * Writes `value` as JSON to `path` atomically: a reader (or a restart after SIGKILL) sees the old record or the new
 * one, never half of one.
 *
 * @example
 * ```ts
 * await writeJsonAtomic('/data/batches/batch_1.json', batch);
 * ```
 */
export async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  const temporary = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(temporary, JSON.stringify(value));
  await rename(temporary, path);
}

/** The JSON record at `path`, or `undefined` when there is none (or it is not JSON: never served). */
export async function readJsonRecord<T>(path: string): Promise<T | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

/**
 * A new id with OpenAI's prefix (`file-`, `batch_`, `batch_req_`): 24 random hex characters.
 *
 * @example
 * ```ts
 * newId('batch_'); // 'batch_3f2a...'
 * ```
 */
export function newId(prefix: string): string {
  return `${prefix}${randomBytes(12).toString('hex')}`;
}

/** Whether `id` is one {@link newId} could have made with `prefix` (ids reach paths on disk: nothing else may). */
export function isId(prefix: string, id: string): boolean {
  return id.startsWith(prefix) && /^[0-9a-f]{24}$/.test(id.slice(prefix.length));
}

/** Seconds since the epoch, as OpenAI's objects carry them. */
export const unixSeconds = (ms: number): number => Math.floor(ms / 1000);
