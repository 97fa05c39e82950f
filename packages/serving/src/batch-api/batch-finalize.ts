// A batch's last step: the lines that never ran before its window expired get `batch_expired`, its output and error
// files are written from the result log under ids planned (and recorded, with the counts) first, then the batch
// object ends (`completed`, `expired` or `cancelled`) and the log is dropped. Run again after a crash, or by
// another replica that took the lease, it finishes under the same ids with the same counts.
import { unixSeconds } from './atomic-json.js';
import { checkLine, readLines } from './batch-input.js';
import type { BatchResults } from './batch-results.js';
import type { BatchStore, StoredBatch } from './batch-store.js';
import type { FileStore } from './file-store.js';

/** What finalization reads and writes, from its runner. */
export interface FinalizeParts {
  readonly files: FileStore;
  readonly batches: BatchStore;
  readonly maxLineBytes: number;
  /** The batch's input file's bytes (`undefined`: deleted). */
  input(stored: StoredBatch): Promise<AsyncIterable<Uint8Array> | undefined>;
  /** Saves the batch, after the runner's earlier writes of it. */
  put(stored: StoredBatch): Promise<StoredBatch>;
}

/**
 * Finalizes `stored` (in `finalizing` or `cancelling`) with its `results`.
 *
 * @example
 * ```ts
 * await finalizeBatch({ files, batches, maxLineBytes, input, put }, stored, results);
 * ```
 */
export async function finalizeBatch(parts: FinalizeParts, stored: StoredBatch, results: BatchResults): Promise<void> {
  const { files } = parts;
  const { id } = stored.batch;
  let current = stored;
  let plan = current.plannedFiles;
  const expiring =
    current.batch.status === 'finalizing' &&
    parts.batches.now() >= current.expiresAtMs &&
    (plan === undefined ? await sumOf(results) : plan.completed + plan.failed) < current.batch.request_counts.total;
  if (expiring && plan === undefined) {
    // OpenAI's behaviour: the requests that never ran get `batch_expired` in the error file.
    const source = await parts.input(current);
    if (source !== undefined) {
      const seen = new Set<string>();
      for await (const raw of readLines(source, parts.maxLineBytes)) {
        const line = checkLine(raw, current.batch.endpoint, seen, parts.maxLineBytes);
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
  // File ids and counts chosen and recorded before the files are written, so a finalization cut short (or run
  // again by another replica) finishes under the same ids with the same counts.
  if (plan === undefined) {
    const counts = await results.counts();
    plan = { output: files.newId(), errors: files.newId(), ...counts };
    current = await parts.put({ ...current, plannedFiles: plan });
  }
  const { owner } = current;
  const planned = plan;
  const output =
    planned.completed > 0 || (await exists(files, planned.output))
      ? await files.adopt(planned.output, () => results.entries(true), {
          filename: `${id}_output.jsonl`,
          purpose: 'batch_output',
          owner,
        })
      : undefined;
  const errors =
    planned.failed > 0 || (await exists(files, planned.errors))
      ? await files.adopt(planned.errors, () => results.entries(false), {
          filename: `${id}_error.jsonl`,
          purpose: 'batch_output',
          owner,
        })
      : undefined;
  const now = unixSeconds(parts.batches.now());
  const wasCancelling = current.batch.status === 'cancelling';
  const status = wasCancelling ? 'cancelled' : expiring ? 'expired' : 'completed';
  await parts.put({
    ...current,
    batch: {
      ...current.batch,
      status,
      output_file_id: output?.file.id ?? null,
      error_file_id: errors?.file.id ?? null,
      request_counts: {
        total: current.batch.request_counts.total,
        completed: planned.completed,
        failed: planned.failed,
      },
      ...(status === 'cancelled'
        ? { cancelled_at: now }
        : status === 'expired'
          ? { expired_at: now }
          : { completed_at: now }),
    },
  });
  // The files hold the results now; a crash before these two leaves only garbage, never a wrong answer.
  await results.delete();
  await parts.batches.clearCancel(id);
}

async function exists(files: FileStore, id: string): Promise<boolean> {
  return (await files.get(id)) !== undefined;
}

/** The results a batch's log holds, successes and failures. */
async function sumOf(results: BatchResults): Promise<number> {
  const { completed, failed } = await results.counts();
  return completed + failed;
}
