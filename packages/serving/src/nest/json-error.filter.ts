import type { IncomingMessage, ServerResponse } from 'node:http';
import { writeHttpError, writeJson } from '@microbatch/core/http';
import { noRoute, requestPath } from '../routes.js';
import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException } from '@nestjs/common';

/**
 * Answers every error of the Nest app as `{"error":{"code","message"}}`, like the Express and Koa apps: `@Batch()`'s
 * exceptions (already in that shape) as they are, Nest's 404 as `No route for GET /path` (the path cut short, where
 * Nest's own message echoes all of it), other `HttpException`s by their status, anything else as a generic 500.
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
    if (!(exception instanceof HttpException)) {
      writeHttpError(res, exception);
      return;
    }
    const status = exception.getStatus();
    const body = exception.getResponse();
    if (isErrorShape(body)) {
      if (res.headersSent) res.destroy();
      else writeJson(res, status, body);
    } else if (status === 404) {
      writeHttpError(res, noRoute(req.method ?? 'GET', requestPath(req.url)));
    } else {
      writeHttpError(res, exception);
    }
  }
}

function isErrorShape(body: unknown): boolean {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return typeof error?.code === 'string' && typeof error.message === 'string';
}
