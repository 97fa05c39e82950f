import type { Server } from 'node:http';
import type { LogLine } from './batch-log.js';

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
 * process.once('SIGTERM', () => void shutdown().then(() => process.exit(0)));
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

/**
 * Options of {@link exitOnSignals}.
 *
 * @example
 * ```ts
 * exitOnSignals(shutdown, { signals: ['SIGTERM'], log: (line) => logger.info(line) });
 * ```
 */
export interface ExitOnSignalsOptions {
  /**
   * The signals that start the shutdown.
   * @default ['SIGTERM', 'SIGINT']
   */
  readonly signals?: readonly NodeJS.Signals[];
  /**
   * Where progress lines go.
   * @default console.log
   */
  readonly log?: LogLine;
  /**
   * Ends the process.
   * @default process.exit
   */
  readonly exit?: (code: number) => void;
}

/**
 * Runs `shutdown` on SIGTERM or SIGINT and exits 0 once it has finished (1 if it failed). Further signals while
 * draining are logged and ignored (SIGKILL still ends the process). Returns the function that removes the listeners.
 *
 * @example
 * ```ts
 * exitOnSignals(shutdownServer(server, { drain: () => model.drain(), close: () => model.close() }));
 * ```
 */
export function exitOnSignals(shutdown: () => Promise<void>, options: ExitOnSignalsOptions = {}): () => void {
  const { signals = ['SIGTERM', 'SIGINT'], log = console.log, exit = (code: number) => process.exit(code) } = options;
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    // A repeat is common (a terminal's Ctrl-C reaches both `pnpm` and this process) and must not drop accepted
    // work; the drain is bounded by the shutdown's own grace period.
    if (stopping) {
      log(`${signal}: already draining`);
      return;
    }
    stopping = true;
    log(`${signal}: no longer accepting requests; finishing the queued and running ones`);
    shutdown().then(
      () => {
        log('drained and closed; exiting');
        exit(0);
      },
      (error: unknown) => {
        log(`shutdown failed: ${error instanceof Error ? error.message : String(error)}`);
        exit(1);
      },
    );
  };
  for (const signal of signals) process.on(signal, onSignal);
  return () => {
    for (const signal of signals) process.off(signal, onSignal);
  };
}
