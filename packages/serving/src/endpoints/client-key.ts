import type { IncomingMessage } from 'node:http';
import { fail } from '@microbatch/core/util';

/**
 * Who a request comes from, for fair shares: requests with the same key share one share of the queue and of each
 * batch. `undefined` falls back to the client's address.
 *
 * @example
 * ```ts
 * const byTenant: ClientKey = (req) => tenantOf(req.headers.authorization);
 * ```
 */
export type ClientKey = (req: IncomingMessage) => string | undefined;

/** The longest key kept as it is; a longer one is cut (keys live in the batcher's per-key state). */
const MAX_KEY_LENGTH = 256;

/**
 * The default {@link ClientKey}: the connection's remote address. A client's own fields (OpenAI's `user`) are never
 * the key: a client that sent each request under a fresh `user` would otherwise take a new share each time.
 *
 * @example
 * ```ts
 * clientAddress(req); // '127.0.0.1'
 * ```
 */
export const clientAddress: ClientKey = (req) => req.socket?.remoteAddress;

/**
 * A {@link ClientKey} read from a header that a trusted proxy in front of the server sets (an API-key id, a tenant,
 * `X-Forwarded-For`'s first hop as the proxy writes it); requests without it are keyed by their address. Use it only
 * behind a proxy that overwrites the header: a client that can set it can choose its own share.
 *
 * @example
 * ```ts
 * createTextCompletionApp(model, { clientKey: clientKeyFromHeader('x-api-key-id') });
 * ```
 */
export function clientKeyFromHeader(name: string): ClientKey {
  if (typeof name !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
    fail('name', 'an HTTP header name', name);
  }
  const header = name.toLowerCase();
  return (req) => {
    const value = req.headers[header];
    const first = (Array.isArray(value) ? value[0] : value)?.trim();
    return first === undefined || first === '' ? clientAddress(req) : `${header}:${first.slice(0, MAX_KEY_LENGTH)}`;
  };
}

/** The fairness key of `req` under `clientKey` (the address where it says nothing), or `undefined`. */
export function fairnessKeyOf(
  req: IncomingMessage | undefined,
  clientKey: ClientKey = clientAddress,
): string | undefined {
  if (req === undefined) return undefined;
  return clientKey(req) ?? clientAddress(req);
}
