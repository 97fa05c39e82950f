import { type RequestListener, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { applyServerLimits, serverOptions } from '@microbatch/core/http';
import { fail } from '@microbatch/core/util';
import { type ShutdownSteps, shutdownServer } from './graceful-shutdown.js';

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
  readonly shutdown: () => Promise<void>;
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
  // Header, request and idle timeouts, a connection cap, and `Expect: 100-continue` refused for oversize bodies.
  const server = createServer(serverOptions(), listener);
  applyServerLimits(server);
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
export async function startServer(
  listener: RequestListener,
  where: ListenOptions,
  lifecycle: ServerLifecycle,
): Promise<RunningServer> {
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
    fail('PORT', 'an integer from 0 to 65535', env.PORT);
  }
  return { port, host: env.HOST ?? '127.0.0.1' };
}
