import type { IncomingMessage, ServerResponse } from 'node:http';
import { writeJson } from '@microbatch/core/http';
import { writeRouteError } from '../route-errors.js';
import { noRoute, requestPath } from '../text-completion-routes.js';
import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException } from '@nestjs/common';

/**
 * Answers every error of the Nest app as `{"error":{"code","message"}}` (OpenAI's shape on `/v1/*`), like the other
 * frameworks' apps: `@Batch()`'s exceptions (already in that shape) as they are, Nest's 404 as `No route for GET
 * /path` (the path cut short, where Nest's own message echoes all of it), other `HttpException`s by their status,
 * anything else as a generic 500.
 *
 * @example
 * ```ts
 * providers: [{ provide: APP_FILTER, useClass: JsonErrorFilter }]
 * ```
 */
@Catch()
export class JsonErrorFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const res = http.getResponse<ServerResponse>();
    const req = http.getRequest<IncomingMessage>();
    const path = requestPath(req.url);
    if (!(exception instanceof HttpException)) {
      writeRouteError(res, path, exception);
      return;
    }
    const status = exception.getStatus();
    const body = exception.getResponse();
    if (isErrorShape(body)) {
      if (res.headersSent) res.destroy();
      else writeJson(res, status, body);
    } else if (status === 404) {
      writeRouteError(res, path, noRoute(req.method ?? 'GET', path));
    } else {
      writeRouteError(res, path, exception);
    }
  }
}

function isErrorShape(body: unknown): boolean {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return typeof error?.code === 'string' && typeof error.message === 'string';
}
