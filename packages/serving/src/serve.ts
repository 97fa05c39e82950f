import { type RequestListener, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LogLine } from './batch-log.js';
import { type ShutdownSteps, exitOnSignals, shutdownServer } from './graceful-shutdown.js';

/**
 * Where a server listens.
 *
 * @example
 * ```ts
 * const where: ListenOptions = { port: 0, host: '127.0.0.1' }; // any free port, tests
 * ```
 */
export interface ListenOptions {
  /** 0 picks a free port. */
  readonly port: number;
  readonly host: string;
}

/**
 * A started app: its server, whether its model loaded, and its graceful shutdown.
 *
 * @example
 * ```ts
 * const running = await start({ port: 0, host: '127.0.0.1', model });
 * await running.ready;
 * await fetch(`${running.url}/healthz`);
 * await running.shutdown();
 * ```
 */
export interface RunningServer {
  readonly server: Server;
  /** `http://host:port`, with the port actually bound. */
  readonly url: string;
  /** Resolves once the app can serve; rejects (with the reason) if its model failed to load. */
  readonly ready: Promise<void>;
  /** Stops accepting, lets every accepted request finish, then releases the model; idempotent. */
  shutdown(): Promise<void>;
}

/**
 * Listens with a Node request listener (an Express app, Koa's `app.callback()`) and resolves once bound.
 *
 * @example
 * ```ts
 * const server = await listen(app, { port: 0, host: '127.0.0.1' });
 * ```
 */
export async function listen(listener: RequestListener, where: ListenOptions): Promise<Server> {
  const server = createServer(listener);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(where.port, where.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/**
 * The URL a listening server answers on, with the port it actually got.
 *
 * @example
 * ```ts
 * serverUrl(server); // 'http://127.0.0.1:8000'
 * ```
 */
export function serverUrl(server: Server): string {
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/**
 * How {@link startServer} learns that the app can serve, and how it shuts down.
 *
 * @example
 * ```ts
 * const lifecycle: ServerLifecycle = { ready: model.ready, drain: () => model.drain(), close: () => model.close() };
 * ```
 */
export interface ServerLifecycle extends ShutdownSteps {
  /**
   * Resolves once the app can serve (its model loaded); rejects if it cannot.
   * @default already resolved
   */
  readonly ready?: Promise<void>;
}

/**
 * Listens with `listener` and returns the running server with its graceful shutdown (see `shutdownServer`). If it
 * cannot listen (port taken), it releases what `lifecycle` holds (worker threads would keep the process alive)
 * and rethrows.
 *
 * @example
 * ```ts
 * const running = await startServer(createApp(adder), { port: 0, host: '127.0.0.1' }, { drain: () => adder.close() });
 * ```
 */
export async function startServer(listener: RequestListener, where: ListenOptions, lifecycle: ServerLifecycle): Promise<RunningServer> {
  let server: Server;
  try {
    server = await listen(listener, where);
  } catch (error) {
    await lifecycle.drain();
    await lifecycle.close?.();
    throw error;
  }
  return {
    server,
    url: serverUrl(server),
    ready: lifecycle.ready ?? Promise.resolve(),
    shutdown: shutdownServer(server, lifecycle),
  };
}

/**
 * `PORT` (default 8000) and `HOST` (default `127.0.0.1`) from the environment; a bad `PORT` throws a `TypeError`.
 *
 * @example
 * ```ts
 * listenOptionsFromEnv({ PORT: '8123' }); // { port: 8123, host: '127.0.0.1' }
 * ```
 */
export function listenOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): ListenOptions {
  const port = Number(env.PORT ?? 8000);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new TypeError(`Expected PORT to be an integer from 0 to 65535, got ${JSON.stringify(env.PORT)}`);
  }
  return { port, host: env.HOST ?? '127.0.0.1' };
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
  log: LogLine = console.log,
): Promise<void> {
  let running: RunningServer;
  try {
    running = await start(where);
  } catch (error) {
    console.error(`Cannot start: ${messageOf(error)}`);
    process.exit(1);
  }
  exitOnSignals(running.shutdown, { log });
  log(`listening on ${running.url}`);
  try {
    await running.ready;
  } catch (error) {
    console.error(messageOf(error));
    // Releases the workers; bounded, because the process must end either way.
    await Promise.race([running.shutdown(), new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
    process.exit(1);
  }
  log(`ready: ${running.url}`);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
