import type { ServerResponse } from 'node:http';

/**
 * Sends `body` as JSON with `status` on a Node response (what Express, Koa and Nest on Express all end in).
 *
 * @example
 * ```ts
 * sendJson(res, 200, { status: 'ok' });
 * ```
 */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(body));
}
