/**
 * The Redis keys of one queue: the request stream and its consumer group, the worker heartbeats, and each web
 * replica's reply stream.
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
  reply(replicaId: string): string;
}

export function queueKeys(prefix: string, queue: string): QueueKeys {
  const base = `${prefix}:${queue}`;
  return {
    requests: `${base}:requests`,
    group: 'workers',
    workers: `${base}:workers`,
    reply: (replicaId) => `${base}:replies:${replicaId}`,
  };
}
