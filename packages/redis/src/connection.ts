import { ErrorReply, createClient } from 'redis';

/** One connection to Redis (node-redis), speaking RESP2 so raw replies are plain arrays of strings. */
export type Connection = ReturnType<typeof connectionFactory>;

function connectionFactory(url: string, name: string, commandTimeoutMs: number) {
  return createClient({
    url,
    name,
    RESP: 2,
    // Commands sent while the connection is down fail at once (503 UNAVAILABLE) instead of waiting in a queue:
    // a request must never hang on a Redis that is gone.
    disableOfflineQueue: true,
    commandOptions: { timeout: commandTimeoutMs },
    socket: {
      connectTimeout: Math.max(1_000, commandTimeoutMs),
      // Reconnect for ever, quickly at first, then every second: Redis may be restarted under us.
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 1_000),
    },
  });
}

/** What {@link openConnection} reports about its connection. */
export interface ConnectionEvents {
  /** The connection is (again) ready for commands. */
  onReady?(): void;
  /** The connection was lost (it reconnects on its own). */
  onDown?(error: unknown): void;
}

/**
 * Opens a connection that reconnects for ever and never queues commands while down. Its `connect()` runs in the
 * background: a Redis that is down at start is not an error, the connection becomes ready when Redis is.
 *
 * @example
 * ```ts
 * const connection = openConnection('redis://127.0.0.1:6379', 'microbatch-replies', 1_000, { onDown: failAll });
 * ```
 */
export function openConnection(
  url: string,
  name: string,
  commandTimeoutMs: number,
  events: ConnectionEvents = {},
): Connection {
  const connection = connectionFactory(url, name, commandTimeoutMs);
  let up = false;
  const down = (error: unknown): void => {
    if (!up) return;
    up = false;
    events.onDown?.(error);
  };
  // node-redis throws an `error` event with no listener; every failure is handled through the commands' own errors.
  connection.on('error', (error: unknown) => down(error));
  connection.on('end', () => down(new Error('The Redis connection ended')));
  connection.on('reconnecting', () => down(new Error('Reconnecting to Redis')));
  connection.on('ready', () => {
    up = true;
    events.onReady?.();
  });
  connection.connect().catch(() => undefined);
  return connection;
}

/**
 * Closes a connection without waiting for Redis (which may be gone). `immediate` drops it at once: for a connection
 * whose only command is a blocking read nobody needs any more.
 */
export async function closeConnection(connection: Connection, immediate = false): Promise<void> {
  if (!connection.isOpen) return;
  if (immediate) {
    connection.destroy();
    return;
  }
  try {
    await Promise.race([connection.close(), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
  } catch {
    // Already closing or closed.
  }
  if (connection.isOpen) connection.destroy();
}

/** Whether a command failed because the connection is down (rather than because Redis refused it). */
export function isConnectionError(error: unknown): boolean {
  // Redis's own error replies (`NOGROUP`, `WRONGTYPE`) are `ErrorReply`s; everything else is the transport.
  return error instanceof Error && !(error instanceof ErrorReply);
}
