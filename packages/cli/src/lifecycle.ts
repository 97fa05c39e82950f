// Process lifecycle: signals and exit codes belong to the executable, not to the serving library.
import { isLogger } from '@microbatch/serving';
import type { ListenOptions, LogTarget, RunningServer } from '@microbatch/serving';

/** One event to a line printer (`line`), or to a pino-compatible logger (`fields` and a short `message`). */
function report(log: LogTarget, level: 'info' | 'error', line: string, fields: object, message: string): void {
  if (isLogger(log)) log[level](fields, message);
  else log(line);
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
   * Where progress goes: a line printer, or a pino-compatible logger (fields).
   * @default console.log
   */
  readonly log?: LogTarget;
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
      report(log, 'info', `${signal}: already draining`, { signal }, 'already draining');
      return;
    }
    stopping = true;
    report(
      log,
      'info',
      `${signal}: no longer accepting requests; finishing the queued and running ones`,
      { signal },
      'draining',
    );
    shutdown().then(
      () => {
        report(log, 'info', 'drained and closed; exiting', {}, 'drained and closed; exiting');
        exit(0);
      },
      (error: unknown) => {
        report(log, 'error', `shutdown failed: ${messageOf(error)}`, { error: messageOf(error) }, 'shutdown failed');
        exit(1);
      },
    );
  };
  for (const signal of signals) process.on(signal, onSignal);
  return () => {
    for (const signal of signals) process.off(signal, onSignal);
  };
}

/**
 * Starts an app and runs it until SIGTERM / SIGINT, then shuts it down gracefully and exits 0. If the app cannot
 * start (port taken) or its model fails to load, prints why and exits 1 instead of hanging.
 *
 * @example
 * ```ts
 * await serveUntilSignal((where) => start({ ...where, model: 'models/tinystories-656k' }), listenOptionsFromEnv());
 * ```
 */
export async function serveUntilSignal(
  start: (where: ListenOptions) => Promise<RunningServer>,
  where: ListenOptions,
  log: LogTarget = console.log,
): Promise<void> {
  let running: RunningServer;
  try {
    running = await start(where);
  } catch (error) {
    console.error(`Cannot start: ${messageOf(error)}`);
    process.exit(1);
  }
  exitOnSignals(running.shutdown, { log });
  report(log, 'info', `listening on ${running.url}`, { url: running.url }, 'listening');
  try {
    await running.ready;
  } catch (error) {
    console.error(messageOf(error));
    // Releases the workers; bounded, because the process must end either way.
    await Promise.race([running.shutdown(), new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
    process.exit(1);
  }
  report(log, 'info', `ready: ${running.url}`, { url: running.url }, 'ready');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
