import type { Server } from 'node:http';

/**
 * What a server does between "stop accepting" and "exit".
 *
 * @example
 * ```ts
 * const steps: ShutdownSteps = { drain: () => model.drain(), close: () => model.close() };
 * ```
 */
export interface ShutdownSteps {
  /** Refuses new work (`batcher.close()`: new calls get 503 `CLOSED`) and resolves once queued and running work is done. */
  drain(): Promise<void>;
  /** Releases what the drained work used (worker threads), once every response has been sent. */
  close?(): Promise<void>;
  /**
   * How long, after draining, responses still being written may keep their connections before they are cut.
   * @default 10000
   */
  readonly graceMs?: number;
}

/**
 * Returns the graceful shutdown of `server`: it stops accepting connections at once, drains (requests already
 * accepted keep going and get their answers; new requests on open keep-alive connections get 503 `CLOSED`), waits
 * for every response to be sent, closes the idle connections, then releases resources. Calling it again returns the
 * same promise.
 *
 * @example
 * ```ts
 * const shutdown = shutdownServer(server, { drain: () => model.drain(), close: () => model.close() });
 * await shutdown(); // on SIGTERM, say (`microbatch serve` and the examples exit then)
 * ```
 */
export function shutdownServer(server: Server, steps: ShutdownSteps): () => Promise<void> {
  if (typeof steps?.drain !== 'function') {
    throw new TypeError(`Expected \`steps.drain\` to be a function, got ${typeof steps?.drain}`);
  }
  const graceMs = steps.graceMs ?? 10_000;
  let stopping: Promise<void> | undefined;
  const stop = async (): Promise<void> => {
    // Resolves once every connection has ended; an error only means the server was not listening any more.
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    await steps.drain();
    // Keep-alive connections sit idle between requests and would hold `close()` open forever; the ones still
    // writing a response (a stream, a body being flushed) become idle when it is sent and are closed then.
    const sweep = setInterval(() => server.closeIdleConnections(), 20);
    const cut = setTimeout(() => server.closeAllConnections(), graceMs);
    try {
      server.closeIdleConnections();
      await closed;
    } finally {
      clearInterval(sweep);
      clearTimeout(cut);
    }
    await steps.close?.();
  };
  return () => (stopping ??= stop());
}
