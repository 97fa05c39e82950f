// A resumable stream's progress record on NATS: what a worker that takes the stream over needs to send each token
// exactly once. NATS has no script that stores the progress and sends the chunk in one step (Redis's `CHUNK`), so
// the record is stored first and names the chunk it precedes: a worker dying between the two leaves a record one
// chunk ahead of the caller, and its successor re-sends that chunk (the replica drops it if it had it) before going
// on from the record's token ids.
import type { JetStreamManager } from '@nats-io/jetstream';
import type { QueueNames } from './names.js';

/** The chunk a progress record precedes: its reply data and the token ids it carries (from `offset`, `count` of them). */
export interface RecordedChunk {
  readonly data: string;
  readonly offset: number;
  readonly count: number;
}

/** An entry's progress: the token ids sent so far, the last chunk's included, and that chunk. */
export interface ProgressRecord {
  readonly tokens: readonly number[];
  readonly chunk: RecordedChunk | undefined;
}

/** A fresh stream's: nothing sent. */
export const NO_PROGRESS: ProgressRecord = { tokens: [], chunk: undefined };

/**
 * The record stored before a chunk goes out: `tokens` (every id so far, the chunk's last) and the chunk.
 *
 * @example
 * ```ts
 * connection.publish(names.progress(entryId), progressRecord([...sent, ...ids], { data, offset: sent.length, count: ids.length }));
 * ```
 */
export function progressRecord(tokens: readonly number[], chunk: RecordedChunk): string {
  return JSON.stringify({ tokens, chunk });
}

/**
 * Reads a stored record; `{ tokens: [] }` (start over: the replica drops what it had) for none or an unreadable one.
 * A bare array of ids (a worker of the previous version) has no chunk to re-send.
 *
 * @example
 * ```ts
 * const { tokens, chunk } = parseProgress(stored?.string());
 * ```
 */
export function parseProgress(text: string | undefined): ProgressRecord {
  if (text === undefined) return NO_PROGRESS;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return NO_PROGRESS;
  }
  if (isIds(value)) return { tokens: value, chunk: undefined };
  if (value === null || typeof value !== 'object') return NO_PROGRESS;
  const { tokens, chunk } = value as { tokens?: unknown; chunk?: Partial<RecordedChunk> | null };
  if (!isIds(tokens)) return NO_PROGRESS;
  const valid =
    typeof chunk?.data === 'string' &&
    Number.isSafeInteger(chunk.offset) &&
    Number.isSafeInteger(chunk.count) &&
    (chunk.offset as number) + (chunk.count as number) === tokens.length;
  return { tokens, chunk: valid ? (chunk as RecordedChunk) : undefined };
}

/** The record stored for `entryId`, if any (a failed read counts as none). */
export async function readProgress(
  manager: JetStreamManager | undefined,
  names: QueueNames,
  entryId: string,
): Promise<ProgressRecord> {
  const stored = await manager?.streams
    .getMessage(names.progressStream, { last_by_subj: names.progress(entryId) })
    .catch(() => null);
  return parseProgress(stored === null || stored === undefined ? undefined : stored.string());
}

function isIds(value: unknown): value is number[] {
  return Array.isArray(value) && value.every(Number.isSafeInteger);
}
