import type { ServerResponse } from 'node:http';
import { type HttpErrorOptions, toHttpError } from './error-mapping.js';

/**
 * Answers `body` as JSON with `status` and any extra `headers`: the one place a microbatch package writes JSON to
 * a Node response. `undefined` is sent as `null`, so the body is always valid JSON.
 *
 * @example
 * ```ts
 * writeJson(res, 200, { status: 'ok' }, { 'Cache-Control': 'no-store' });
 * ```
 */
export function writeJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers?: Readonly<Record<string, string>>,
): void {
  writeJsonText(res, status, JSON.stringify(body ?? null), headers);
}

/**
 * {@link writeJson} for a body already written as JSON text, by a serializer faster than `JSON.stringify` for its
 * shape (embeddings: float vectors). The text is sent as given: the caller makes sure it is valid JSON.
 *
 * @example
 * ```ts
 * writeJsonText(res, 200, '{"status":"ok"}');
 * ```
 */
export function writeJsonText(
  res: ServerResponse,
  status: number,
  text: string,
  headers?: Readonly<Record<string, string>>,
): void {
  res.statusCode = status;
  if (headers !== undefined) for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end(text);
}

/**
 * Answers `error` on a Node response as `{"error":{"code","message"}}` with the status and headers of
 * {@link toHttpError}, or cuts the response short if part of it was already sent (a half-sent body must not look
 * complete to the client).
 *
 * @example
 * ```ts
 * writeHttpError(res, new BatchError('INVALID_INPUT', '`prompt` must be a string')); // 400
 * ```
 */
export function writeHttpError(res: ServerResponse, error: unknown, options?: HttpErrorOptions): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, headers, body } = toHttpError(error, options);
  writeJson(res, status, body, headers);
}
