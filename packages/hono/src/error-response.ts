import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { reporterFromOptions, toHttpError } from '@microbatch/core/web';

/**
 * The response for `error`: `{"error":{"code","message"}}` with the status and headers from `toHttpError`; never a
 * stack trace or an unexposed message.
 *
 * @example
 * ```ts
 * app.notFound((c) => errorResponse(c, routeNotFound(c.req.method, c.req.path)));
 * ```
 */
export function errorResponse(c: Context, error: unknown): Response {
  const { status, headers, body } = toHttpError(error);
  return c.body(JSON.stringify(body), status as ContentfulStatusCode, { ...headers, ...JSON_TYPE });
}

/** The Content-Type of every JSON answer, as the other adapters send it. */
export const JSON_TYPE: Readonly<Record<string, string>> = { 'Content-Type': 'application/json; charset=utf-8' };

/** The `onError` of `caller`'s options, checked, as a reporter of server errors; `console.error` by default. */
export function errorReporter(
  caller: string,
  options: { readonly onError?: unknown } | undefined,
): (error: unknown) => void {
  // Hono's own default error handler logs with console.error.
  return reporterFromOptions(caller, options, (error) => console.error(error));
}
