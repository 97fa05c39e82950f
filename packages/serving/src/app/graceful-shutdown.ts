import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import { checkFunction } from '@microbatch/core/util';

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
  readonly drain: () => Promise<void>;
  /** Releases what the drained work used (worker threads), once every response has been sent. */
  readonly close?: () => Promise<void>;
  /**
   * How long, after draining, responses still being written may keep their connections before they are cut.
   * @default 10000
   */
  readonly graceMs?: number;
}

/**
 * How long a connection accepted before the shutdown may stay open without sending a byte of a request: one
 * whose request is on its way is answered; one that only connected (a client's pre-opened socket) is closed then.
 */
const SILENT_CONNECTION_MS = 5_000;

/** How often open connections are looked at while the server shuts down. */
const SWEEP_MS = 20;

/**
 * After draining, the listener stays open until no connection arrived for this long (a burst still connecting is
 * taken in and answered, not reset in the listen backlog), and at most `graceMs`.
 */
const QUIET_MS = 100;

/**
 * An idle keep-alive connection is closed once it has been idle this long: a client that reuses it at the moment
 * it is closed would see its request reset, and clients reuse a connection right after its response.
 */
const IDLE_GRACE_MS = 1_000;

/** What the shutdown knows of one connection: requests seen and finished on it, and when it last went quiet. */
interface ConnectionState {
  requests: number;
  finished: number;
  /** `socket.bytesRead` when its last response finished: more means a next request is arriving. */
  readAtIdle: number;
  /** When it connected, then when its last response finished. */
  since: number;
}

/**
 * Returns the graceful shutdown of `server`, which loses no request whose bytes reached the server:
 *
 * 1. it drains: requests already accepted run and get their answers, new requests get 503 `CLOSED` from the
 *    closed batchers, and every response from then on says `Connection: close`, so busy keep-alive connections
 *    end after their last response;
 * 2. idle keep-alive connections are closed after a second idle; a connection whose request is still arriving is
 *    answered first (Node's own `server.close()` would cut it); one that sent nothing for 5 s is closed;
 * 3. once drained and no connection arrived for a moment, it stops listening: later clients are refused
 *    (ECONNREFUSED), none of those the kernel had already accepted (the listen backlog) is reset;
 * 4. once every connection has ended (or `graceMs` after that, when the rest are cut), it releases resources.
 *
 * Call it before the server receives connections (`startServer` does). Calling the returned function again
 * returns the same promise.
 *
 * @example
 * ```ts
 * const shutdown = shutdownServer(server, { drain: () => model.drain(), close: () => model.close() });
 * await shutdown(); // on SIGTERM, say (`microbatch serve` and the examples exit then)
 * ```
 */
export function shutdownServer(server: Server, steps: ShutdownSteps): () => Promise<void> {
  checkFunction('steps.drain', steps?.drain);
  const graceMs = steps.graceMs ?? 10_000;
  const connections = new Map<Socket, ConnectionState>();
  const inFlight = new Set<ServerResponse>();
  let stopping: Promise<void> | undefined;
  let accepted = 0;

  server.on('connection', (socket: Socket) => {
    accepted += 1;
    connections.set(socket, { requests: 0, finished: 0, readAtIdle: 0, since: performance.now() });
    socket.once('close', () => connections.delete(socket));
  });
  // First among the request listeners, so that a response the app writes at once already carries the header.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    // Kept now: by the response's `close`, Node may have detached the socket from the request (`req.socket` null).
    const { socket } = req;
    const state = connections.get(socket);
    if (state !== undefined) state.requests += 1;
    inFlight.add(res);
    res.once('close', () => {
      inFlight.delete(res);
      if (state === undefined) return;
      state.finished += 1;
      state.readAtIdle = socket.bytesRead;
      state.since = performance.now();
    });
    if (stopping !== undefined) closeAfter(res);
  });

  const sweep = (): void => {
    const now = performance.now();
    for (const [socket, state] of connections) {
      if (state.requests > state.finished) continue; // busy: its response says `Connection: close`
      // A request on its way (bytes read since the last response) is answered; a socket that only connected gets a
      // few seconds for its first bytes; an idle keep-alive connection, a second (then it is closed).
      const arriving = socket.bytesRead > state.readAtIdle;
      const fresh = now - state.since < (state.requests === 0 ? SILENT_CONNECTION_MS : IDLE_GRACE_MS);
      // `end()`, not `destroy()`: the last response may still be in the socket's buffer; the peer's FIN closes it.
      if (!arriving && !fresh && !socket.writableEnded) socket.end();
    }
  };

  const stop = async (): Promise<void> => {
    // New work is refused from now on (503 CLOSED, `Connection: close`); what is queued or running finishes.
    for (const res of inFlight) closeAfter(res);
    const sweeper = setInterval(sweep, SWEEP_MS);
    let cut: NodeJS.Timeout | undefined;
    try {
      sweep();
      await steps.drain();
      // Connections whose handshake the kernel completed wait in the listen backlog, and closing the listener would
      // reset them: it stays open while the server drains (a request arriving then is answered 503 CLOSED with
      // `Connection: close`) and until connections stop arriving, then closes. `net.Server`'s own `close()`, not
      // `http.Server`'s, which (Node >= 19) also destroys connections whose request is not parsed yet.
      await lingerWhileConnecting(() => accepted, graceMs);
      const closed = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
      cut = setTimeout(() => server.closeAllConnections(), graceMs);
      await closed;
    } finally {
      clearInterval(sweeper);
      clearTimeout(cut);
      // Every connection has ended: `http.Server#close()` now only stops its timeout checks.
      if (!server.listening) server.close(() => undefined);
    }
    await steps.close?.();
  };
  return () => (stopping ??= stop());
}

/** Makes `res` the last response of its connection, if its headers are not sent yet. */
function closeAfter(res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('Connection', 'close');
}

/** Resolves after the event loop has been through its poll phase (where pending connections are accepted). */
function turnEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

/** Resolves once no connection was accepted for {@link QUIET_MS} (after a turn of the loop), or after `maxMs`. */
async function lingerWhileConnecting(accepted: () => number, maxMs: number): Promise<void> {
  const started = performance.now();
  await turnEventLoop();
  while (performance.now() - started < maxMs) {
    const seen = accepted();
    await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
    await turnEventLoop();
    if (accepted() === seen) return;
  }
}
