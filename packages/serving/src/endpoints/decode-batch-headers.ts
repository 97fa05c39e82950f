// The `X-Batch-*` headers of a generation under continuous scheduling: the decode-loop step that batched it, which
// replaces the batcher's single-request dispatch (every text endpoint and the Nest interceptor set them).
import type { ServerResponse } from 'node:http';
import type { DecodeBatch } from '@microbatch/inference';

/**
 * The `X-Batch-Size` / `X-Batch-Id` headers of continuous scheduling, from the decode-loop step that batched a
 * generation (`output.batch`, or a stream's first chunk's): how many sequences got a token in that step, the most
 * this generation shared a step with by the time the headers go out (its whole life for a JSON answer, up to its
 * first chunk for a stream), and the step's id, which every generation that shared that step as its largest carries
 * too. Of several generations (the prompts of one request), the largest step's. `{}` without a `batch` (request
 * scheduling), so the batcher's dispatch headers stand.
 *
 * @example
 * ```ts
 * res.set(decodeBatchHeaders([output])); // { 'X-Batch-Size': '9', 'X-Batch-Id': 'w0-3f2a:57' }
 * ```
 */
export function decodeBatchHeaders(
  generations: readonly { readonly batch?: DecodeBatch | undefined }[],
): Record<string, string> {
  let largest: DecodeBatch | undefined;
  for (const { batch } of generations) {
    if (batch !== undefined && (largest === undefined || batch.size > largest.size)) largest = batch;
  }
  return largest === undefined ? {} : { 'X-Batch-Size': String(largest.size), 'X-Batch-Id': largest.id };
}

/**
 * Sets {@link decodeBatchHeaders} on a Node response whose headers have not gone out yet (continuous scheduling:
 * the decode loop's batch replaces the batcher's single-request dispatch headers); nothing once they have.
 *
 * @example
 * ```ts
 * setDecodeBatchHeaders(res, outputs); // X-Batch-Size: 9, X-Batch-Id: w0-3f2a:57
 * ```
 */
export function setDecodeBatchHeaders(
  res: ServerResponse,
  generations: readonly { readonly batch?: DecodeBatch | undefined }[],
): void {
  if (res.headersSent) return;
  for (const [name, value] of Object.entries(decodeBatchHeaders(generations))) res.setHeader(name, value);
}
