// The stream, consumer and subjects of one queue, named from its prefix and its name by an injective encoding: two
// queue names never share a stream (`a.b` and `a_b` used to become one), and no queue's stream is another's progress
// stream.

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

/** JetStream's longest stream name (nats-server refuses a longer one: "stream name is too long"). */
export const MAX_STREAM_NAME = 255;

const PLAIN = /[A-Za-z0-9-]/;

/**
 * A queue name as a stream name and subject token: letters, digits and `-` stay, `_` becomes `__`, and every other
 * UTF-8 byte `_` and two hex digits (`a.b` → `a_2eb`, `a_b` → `a__b`). Decodable, hence injective; never `.`, `*`,
 * `>` or white space; and no queue's stream is another's `<stream>_progress` (`_p` starts no escape, so an encoded
 * name never goes on with `_progress`).
 *
 * @example
 * ```ts
 * encodeQueueName('Qwen2.5-0.5B'); // 'Qwen2_2e5-0_2e5B'
 * ```
 */
export function encodeQueueName(queue: string): string {
  let encoded = '';
  for (const char of queue) {
    if (PLAIN.test(char)) encoded += char;
    else if (char === '_') encoded += '__';
    else for (const byte of Buffer.from(char)) encoded += `_${byte.toString(16).padStart(2, '0')}`;
  }
  return encoded;
}

/**
 * The names of a queue's objects. `prefix` is letters, digits and `-` (checked by the options), so `<prefix>_` ends
 * where the encoded queue name starts.
 *
 * @example
 * ```ts
 * queueNames('microbatch', 'tinystories-656k').stream; // 'microbatch_tinystories-656k'
 * ```
 */
export function queueNames(prefix: string, queue: string): QueueNames {
  const name = encodeQueueName(queue);
  const base = `${prefix}.${name}`;
  return {
    stream: `${prefix}_${name}`,
    requests: `${base}.requests`,
    consumer: 'workers',
    workers: `${base}.workers`,
    replicas: `${base}.replicas`,
    ping: `${base}.ping`,
    reply: (replicaId) => `${base}.reply.${replicaId}`,
    progressStream: `${prefix}_${name}_progress`,
    progress: (entryId) => `${base}.progress.${entryId}`,
  };
}
