// What a Node HTTP server serving a model should refuse to wait for, whatever framework answers its requests:
// slow headers, slow uploads, idle or non-reading clients, more connections than it can serve, and a client that
// announces (`Expect: 100-continue`) a body larger than any route takes.
import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import { writeHttpError } from './json.js';
import { BatchError } from '../errors.js';
import { JSON_BODY_LIMIT } from './json-body.js';
import { dropUndefined } from '../util/defined.js';

/** Limits of {@link serverOptions} and {@link applyServerLimits}; every one is in milliseconds unless named otherwise. */
export interface ServerLimits {
  /**
   * The longest wait for a request's headers (Node's default is 60 s).
   * @default 10_000
   */
  readonly headersTimeoutMs?: number;
  /**
   * The longest wait for a whole request, body included (Node's default is 300 s: a slow upload held a slot that long).
   * @default 30_000
   */
  readonly requestTimeoutMs?: number;
  /**
   * How long an idle keep-alive connection stays open after its last response.
   * @default 5_000
   */
  readonly keepAliveTimeoutMs?: number;
  /**
   * A connection on which nothing moves this long is closed: a client that stops reading a stream (its socket
   * buffers full) is dropped, which cancels its item and frees its batch slot.
   * @default 60_000
   */
  readonly idleTimeoutMs?: number;
  /**
   * Connections beyond this many are closed as they arrive.
   * @default 10_000
   */
  readonly maxConnections?: number;
  /**
   * A request announcing a larger body with `Expect: 100-continue` is answered 413 before its body is sent.
   * @default JSON_BODY_LIMIT (64 KiB)
   */
  readonly maxBodyBytes?: number;
}

const DEFAULTS = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 60_000,
  maxConnections: 10_000,
  maxBodyBytes: JSON_BODY_LIMIT,
} as const satisfies Required<ServerLimits>;

/**
 * The `http.createServer` options that carry {@link ServerLimits}' timeouts (they are checked every second rather
 * than Node's 30 s, so a timeout is not overshot by half a minute).
 *
 * @example
 * ```ts
 * const server = createServer(serverOptions(), app);
 * applyServerLimits(server);
 * ```
 */
export function serverOptions(limits: ServerLimits = {}): ServerOptions {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = { ...DEFAULTS, ...dropUndefined(limits) };
  return {
    headersTimeout: headersTimeoutMs,
    requestTimeout: Math.max(requestTimeoutMs, headersTimeoutMs),
    keepAliveTimeout: keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.min(1_000, headersTimeoutMs),
  };
}

/**
 * Applies {@link ServerLimits} to a server (its timeouts too, for a server created by a framework, such as Nest's):
 * idle timeout, connection cap, and `Expect: 100-continue` answered 413 when the announced `Content-Length` is over
 * `maxBodyBytes` (otherwise `100 Continue`, as Node would).
 *
 * @example
 * ```ts
 * const app = await NestFactory.create(AppModule, { bodyParser: false });
 * applyServerLimits(app.getHttpServer());
 * ```
 */
export function applyServerLimits(server: Server, limits: ServerLimits = {}): void {
  const settings = { ...DEFAULTS, ...dropUndefined(limits) };
  server.headersTimeout = settings.headersTimeoutMs;
  server.requestTimeout = Math.max(settings.requestTimeoutMs, settings.headersTimeoutMs);
  server.keepAliveTimeout = settings.keepAliveTimeoutMs;
  server.maxConnections = settings.maxConnections;
  // With no 'timeout' listener, Node destroys a socket idle this long.
  server.setTimeout(settings.idleTimeoutMs);
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const announced = Number(req.headers['content-length']);
    if (Number.isFinite(announced) && announced > settings.maxBodyBytes) {
      res.setHeader('Connection', 'close');
      writeHttpError(
        res,
        new BatchError(
          'ITEM_TOO_LARGE',
          `The request body is larger than the limit of ${settings.maxBodyBytes} bytes`,
          {
            details: { limit: settings.maxBodyBytes },
          },
        ),
      );
      return;
    }
    res.writeContinue();
    server.emit('request', req, res);
  });
}

/**
 * Throws a `TypeError` at start-up if a server timeout could close a connection whose request is still waiting for
 * its answer: an item may wait up to `deadlineMs` (a queue's deadline) and must then get its 503/504, never a
 * closed connection. Only the idle timeout runs while a request waits for its answer (Node's `requestTimeout` and
 * `headersTimeout` stop once the request is received; `keepAliveTimeout` starts after the response).
 *
 * @example
 * ```ts
 * checkDeadlineFits(queue.timeoutMs); // throws if the idle timeout is not longer than the queue's deadline
 * ```
 */
export function checkDeadlineFits(deadlineMs: number, limits: ServerLimits = {}): void {
  const { idleTimeoutMs } = { ...DEFAULTS, ...dropUndefined(limits) };
  if (!(idleTimeoutMs > deadlineMs)) {
    throw new TypeError(
      `Expected the server's \`idleTimeoutMs\` (${idleTimeoutMs}) to be longer than the longest queue deadline ` +
        `(${deadlineMs} ms): a waiting client would see its connection closed instead of a 504`,
    );
  }
}
