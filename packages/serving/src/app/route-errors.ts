// Which shape an app's error answers take, the same on every framework: OpenAI's on `/v1/*` (what OpenAI clients
// read: the endpoints' own errors, bodies refused before they reach one, unknown routes and methods), microbatch's
// elsewhere (probes, metrics, the tutorial's route). Either way the status is core's `toHttpError`'s.
import type { ServerResponse } from 'node:http';
import type { HttpErrorOptions } from '@microbatch/core/http';
import { toHttpError, writeHttpError } from '@microbatch/core/http';
import { toOpenAiError, writeOpenAiError } from '../openai/openai-error.js';

/**
 * Whether errors on `path` (as sent, routed strictly: case and trailing slash matter) are in OpenAI's shape.
 *
 * @example
 * ```ts
 * isOpenAiPath('/v1/models'); // true
 * isOpenAiPath('/healthz'); // false
 * ```
 */
export function isOpenAiPath(path: string): boolean {
  return path.startsWith('/v1/') || OPENAI_SHAPED_PATHS.has(path);
}

/** Paths outside `/v1/` whose errors take OpenAI's shape too, as vLLM answers there: `/rerank`, `/classify`. */
const OPENAI_SHAPED_PATHS: ReadonlySet<string> = new Set(['/rerank', '/classify']);

/**
 * Writes `error` on a Node response in the shape {@link isOpenAiPath} picks for `path`.
 *
 * @example
 * ```ts
 * app.use((req, res) => writeRouteError(res, req.path, noRoute(req.method, req.path)));
 * ```
 */
export function writeRouteError(
  res: ServerResponse,
  path: string,
  error: unknown,
  options: HttpErrorOptions = {},
): void {
  if (isOpenAiPath(path)) writeOpenAiError(res, error, options);
  else writeHttpError(res, error, options);
}

/**
 * `error` as status, headers and the JSON text of the shape {@link isOpenAiPath} picks for `path`, for a framework
 * that sends its own replies (Fastify, Hono).
 *
 * @example
 * ```ts
 * const { status, headers, json } = routeErrorAnswer('/v1/nope', noRoute('GET', '/v1/nope'));
 * ```
 */
export function routeErrorAnswer(
  path: string,
  error: unknown,
): { readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly json: string } {
  const { status, headers, body } = isOpenAiPath(path) ? toOpenAiError(error) : toHttpError(error);
  return { status, headers, json: JSON.stringify(body) };
}
