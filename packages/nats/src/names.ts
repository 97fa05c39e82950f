/** The stream, consumer and subjects of one queue. */
export interface QueueNames {
  /** The work-queue stream holding the request entries. */
  readonly stream: string;
  /** The subject request entries are published on. */
  readonly requests: string;
  /** The durable pull consumer every worker shares. */
  readonly consumer: string;
  /** Where workers announce themselves (core NATS). */
  readonly workers: string;
  /** Where web replicas announce themselves (core NATS): workers drop the entries of one gone silent. */
  readonly replicas: string;
  /** Where a replica asks the live workers to announce themselves at once. */
  readonly ping: string;
  /** A replica's reply subject (core NATS). */
  reply(replicaId: string): string;
  /** The stream of resumable streams' progress: per entry, the token ids sent so far (the last message kept). */
  readonly progressStream: string;
  /** The subject of one entry's progress. */
  progress(entryId: string): string;
}

export function queueNames(prefix: string, queue: string): QueueNames {
  const base = `${prefix}.${queue}`;
  return {
    stream: `${prefix}_${queue}`,
    requests: `${base}.requests`,
    consumer: 'workers',
    workers: `${base}.workers`,
    replicas: `${base}.replicas`,
    ping: `${base}.ping`,
    reply: (replicaId) => `${base}.reply.${replicaId}`,
    progressStream: `${prefix}_${queue}_progress`,
    progress: (entryId) => `${base}.progress.${entryId}`,
  };
}
