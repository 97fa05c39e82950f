import { type RequestListener, type Server, type ServerOptions, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A server listening on 127.0.0.1 on a free port. */
export interface TestServer {
  readonly url: string;
  readonly server: Server;
  /** Cuts every connection and closes the server. */
  readonly close: () => Promise<void>;
}

/**
 * Serves `listener` (an Express app, a Koa `app.callback()`) on a free port of 127.0.0.1, with Node's server
 * `options` if given (timeouts, say).
 *
 * @example
 * ```ts
 * const { url, close } = await listen(app);
 * await fetch(`${url}/adder`, { method: 'POST', body });
 * await close();
 * ```
 */
export async function listen(listener: RequestListener, options: ServerOptions = {}): Promise<TestServer> {
  const server = createServer(options, listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: serverUrlOf(server), server, close: () => closeServer(server) };
}

/** The `http://127.0.0.1:port` of a listening server. */
export function serverUrlOf(server: Server): string {
  const { port } = server.address() as AddressInfo;
  return `http://127.0.0.1:${port}`;
}

/** Cuts every connection of `server` and closes it. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.closeAllConnections();
    server.close((error) => (error === undefined ? resolve() : reject(error)));
  });
}
