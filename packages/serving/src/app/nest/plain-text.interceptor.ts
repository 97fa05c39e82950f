import type { ServerResponse } from 'node:http';
import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import { type Observable, tap } from 'rxjs';

/**
 * Sends a successful string result as `text/plain` (Express would say `text/html`, wrong for echoed user text).
 * Unlike `@Header()`, it leaves error responses their JSON content type.
 *
 * @example
 * ```ts
 * @Get() @UseInterceptors(PlainTextInterceptor) hello() { return 'hi'; }
 * ```
 */
@Injectable()
export class PlainTextInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const res = context.switchToHttp().getResponse<ServerResponse>();
    return next.handle().pipe(tap(() => res.setHeader('Content-Type', 'text/plain; charset=utf-8')));
  }
}
