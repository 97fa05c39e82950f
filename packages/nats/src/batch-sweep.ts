// Chunks of uploads whose writer died (SIGKILL, a lost machine) mid-put: the Object Store purges a failed put's
// chunks itself, but a dead process cannot, and no object's metadata names them, so they are never visible yet
// would stay for ever. A store sweeps them when it opens, as Redis drops an upload key left alone past its ttl: a
// chunk subject no object owns whose last chunk is older than the idle time is purged. An upload under way writes
// a chunk at least every few seconds, so it is never taken for a dead one.
import type { JetStreamManager } from '@nats-io/jetstream';

/** How long an unowned upload must have been idle before it counts as dead (as a Redis upload key's ttl). */
export const ORPHAN_IDLE_MS = 60 * 60 * 1000;

/**
 * Purges the chunks in Object Store `bucket` that no object owns and whose last chunk NATS stored before
 * `writtenBefore`; returns how many uploads' chunks it purged.
 *
 * @example
 * ```ts
 * await sweepOrphanChunks(manager, 'microbatch_batch_blobs', new Date(Date.now() - ORPHAN_IDLE_MS));
 * ```
 */
export async function sweepOrphanChunks(
  manager: JetStreamManager,
  bucket: string,
  writtenBefore: Date,
): Promise<number> {
  const stream = `OBJ_${bucket}`;
  const chunkPrefix = `$O.${bucket}.C.`;
  const chunks = await subjectsOf(manager, stream, `${chunkPrefix}>`);
  if (chunks.length === 0) return 0;
  const owned = new Set<string>();
  for (const meta of await subjectsOf(manager, stream, `$O.${bucket}.M.>`)) {
    const info = (await manager.streams.getMessage(stream, { last_by_subj: meta }))?.json<{ nuid?: string }>();
    if (typeof info?.nuid === 'string') owned.add(info.nuid);
  }
  let purged = 0;
  for (const subject of chunks) {
    if (owned.has(subject.slice(chunkPrefix.length))) continue;
    const last = await manager.streams.getMessage(stream, { last_by_subj: subject });
    if (last === null || last.time >= writtenBefore) continue;
    await manager.streams.purge(stream, { filter: subject });
    purged += 1;
  }
  return purged;
}

/** The subjects under `filter` that hold messages in `stream`. */
async function subjectsOf(manager: JetStreamManager, stream: string, filter: string): Promise<string[]> {
  const { state } = await manager.streams.info(stream, { subjects_filter: filter });
  return Object.keys(state.subjects ?? {});
}
