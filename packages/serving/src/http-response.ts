import type { ServerResponse } from 'node:http';
import { toHttpError } from '@microbatch/core';

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

/**
 * Answers `error` as `{"error":{"code","message","details"?}}` with the status of core's `toHttpError` (so no stack
 * or unexposed message leaks), or cuts the response short if part of it was already sent.
 *
 * @example
 * ```ts
 * sendError(res, new BatchError('INVALID_INPUT', '`prompt` must be a string', { details: { field: 'prompt' } })); // 400
 * ```
 */
export function sendError(res: ServerResponse, error: unknown): void {
  if (res.headersSent) {
    // A half-sent body must not look complete to the client.
    res.destroy();
    return;
  }
  const { status, headers, body } = toHttpError(error);
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  sendJson(res, status, body);
}
