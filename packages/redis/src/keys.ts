/**
 * The Redis keys of one queue: the request stream and its consumer group, the worker heartbeats and settings, the
 * web replicas' heartbeats, and each web replica's reply stream.
 *
 * @example
 * ```ts
 * queueKeys('microbatch', 'tinystories-656k').requests; // 'microbatch:tinystories-656k:requests'
 * ```
 */
export interface QueueKeys {
  readonly requests: string;
  readonly group: string;
  readonly workers: string;
  /** A hash: each live worker's settings (pull size, wait, concurrency), as JSON. */
  readonly workerSettings: string;
  /** A sorted set: each web replica's reply stream, scored with the time its heartbeat expires. */
  readonly replicas: string;
  /** A hash: each live web replica's items in flight per fairness key, as JSON (for fair admission). */
  readonly replicaLoads: string;
  reply(replicaId: string): string;
  /** A string: the token ids a stream's chunks carried so far ("1,2,3,"), for a worker that takes it over. */
  progress(entryId: string): string;
}

export function queueKeys(prefix: string, queue: string): QueueKeys {
  const base = `${prefix}:${queue}`;
  return {
    requests: `${base}:requests`,
    group: 'workers',
    workers: `${base}:workers`,
    workerSettings: `${base}:workers:settings`,
    replicas: `${base}:replicas`,
    replicaLoads: `${base}:replicas:load`,
    reply: (replicaId) => `${base}:replies:${replicaId}`,
    progress: (entryId) => `${base}:progress:${entryId}`,
  };
}
