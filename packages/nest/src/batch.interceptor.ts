import type { ServerResponse } from 'node:http';
import {
  type DisconnectWatch,
  SSE_HEADERS,
  batchHeaders,
  serverErrorReporter,
  toHttpError,
  toSseBody,
  watchDisconnect,
} from '@microbatch/core/http';
import { HttpException, Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { Observable } from 'rxjs';
import { BATCH_MODULE_OPTIONS } from './batch.constants.js';
import type { BatchModuleOptions } from './batch.options.js';
import { type RequestScope, requestScopes } from './batch.storage.js';
import { routeTargetOf } from './batch.target.js';

/**
 * The HTTP side of `@Batch()`, which applies it to every batched route: hands the request's signal and header sink
 * to the batched method, sets `X-Batch-Size`, `X-Batch-Id` and `X-Queue-Time-Ms`, answers streaming routes with
 * Server-Sent Events, turns batching errors into `HttpException`s with core's statuses and `{"error":{...}}` body,
 * reports 500s to `BatchModule.forRoot({ onError })` (a Nest `Logger` by default), and cancels the request's item
 * when its client goes away. Apply it yourself only to place it among other interceptors; it fails on a route
 * without `@Batch()`. Subclass it to change how errors become exceptions or are reported, or how headers are set
 * (the protected methods), and apply the subclass with `@UseInterceptors()`: the `BatchInterceptor` that `@Batch()`
 * adds then steps aside for it.
 *
 * @example
 * ```ts
 * @Injectable()
 * class TracedBatchInterceptor extends BatchInterceptor {
 *   protected override reportError(error: unknown): void {
 *     trace.getActiveSpan()?.recordException(error as Error);
 *     super.reportError(error);
 *   }
 * }
 *
 * @Controller()
 * @UseInterceptors(LoggingInterceptor, TracedBatchInterceptor) // runs inside LoggingInterceptor
 * class CompletionController {
 *   @Post('generate') @Batch() generate(@Body() bodies: GenerateDto[]) { ... }
 * }
 * ```
 */
@Injectable()
export class BatchInterceptor implements NestInterceptor {
  readonly #adapterHost: HttpAdapterHost;
  readonly #report: (error: unknown) => void;

  constructor(
    @Inject(HttpAdapterHost) adapterHost: HttpAdapterHost,
    @Optional() @Inject(BATCH_MODULE_OPTIONS) moduleOptions?: BatchModuleOptions,
  ) {
    if (moduleOptions === undefined) {
      throw new TypeError(
        '@Batch(): BatchModule is not imported; add BatchModule.forRoot() to the imports of the root module',
      );
    }
    this.#adapterHost = adapterHost;
    const logger = new Logger('BatchInterceptor');
    // Once per error: a batch that throws fails each of its items with the same error.
    this.#report = serverErrorReporter(moduleOptions.onError ?? ((error) => logger.error(error)));
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler();
    const target = routeTargetOf(handler);
    if (target === undefined) {
      throw new TypeError(
        `@Batch(): BatchInterceptor is applied to ${context.getClass().name}.${handler.name}, which has no @Batch(); ` +
          'decorate the method or its class with @Batch()',
      );
    }
    if (context.getType() !== 'http') return next.handle();
    const http = context.switchToHttp();
    const request: unknown = http.getRequest();
    const response: unknown = http.getResponse();
    // Applied both by hand (class level) and by @Batch(): the outer one does the work.
    if (requestScopes.getStore()?.request === request) return next.handle();

    return new Observable<unknown>((subscriber) => {
      // Two ways to learn that the answer is no longer wanted: the Node response closed early (core's watch, as in
      // the Express and Koa adapters), or Nest tore the interceptor chain down.
      const disconnect = watchResponse(response);
      const teardown = new AbortController();
      const signal = disconnect === undefined ? teardown.signal : AbortSignal.any([disconnect.signal, teardown.signal]);
      let delivered = false;
      let streaming = false;
      const scope: RequestScope = {
        request,
        target,
        signal,
        onDispatch: (info) => this.setHeaders(response, batchHeaders(info)),
        claimed: false,
      };
      const subscription = requestScopes
        .run(scope, () => next.handle())
        .subscribe({
          next: (value) => {
            delivered = true;
            streaming = target.streaming && isAsyncIterator(value);
            if (!streaming) disconnect?.dispose();
            subscriber.next(
              streaming ? this.#sseBody(value as AsyncIterator<unknown>, response, teardown, disconnect) : value,
            );
          },
          error: (error: unknown) => {
            delivered = true;
            disconnect?.dispose();
            subscriber.error(this.toException(error, response));
          },
          complete: () => subscriber.complete(),
        });
      return () => {
        subscription.unsubscribe();
        // Torn down before a result was delivered: Nest saw the client go away.
        if (!delivered) {
          teardown.abort(clientGone());
          disconnect?.dispose();
        }
      };
    });
  }

  /**
   * The exception Nest's filters answer for `error`: a pipe's or handler's own `HttpException` as it is, anything
   * else mapped by core's `toHttpError` (status, `Retry-After`, `{"error":{"code","message"}}`, no internals),
   * with 500s reported to `onError`.
   */
  protected toException(error: unknown, response: unknown): HttpException {
    if (error instanceof HttpException) return error;
    const { status, headers, body } = toHttpError(error);
    this.setHeaders(response, headers);
    this.reportError(error);
    return new HttpException(body, status, { cause: error });
  }

  /** Reports an error the client was answered with: 500s go to `onError` once each, the rest are expected answers. */
  protected reportError(error: unknown): void {
    if (error instanceof HttpException) return;
    this.#report(error);
  }

  /** Sets response headers through the platform (Express or Fastify), unless the headers already went out. */
  protected setHeaders(response: unknown, headers: Readonly<Record<string, string>>): void {
    const adapter = this.#adapterHost.httpAdapter;
    if (adapter.isHeadersSent(response)) return;
    for (const [name, value] of Object.entries(headers)) adapter.setHeader(response, name, value);
  }

  #sseBody(
    source: AsyncIterator<unknown>,
    response: unknown,
    teardown: AbortController,
    disconnect: DisconnectWatch | undefined,
  ): AsyncIterator<string> {
    return toSseBody(source, {
      start: () => this.setHeaders(response, STREAM_HEADERS),
      reject: (error) => this.toException(error, response),
      report: (error) => this.reportError(error),
      cancel: () => teardown.abort(clientGone()),
      end: () => disconnect?.dispose(),
    });
  }
}

// `Connection: keep-alive` set by hand makes Node keep the socket although the client sent `Connection: close`;
// HTTP/1.1 keeps connections alive by default anyway.
const { Connection: _connection, ...STREAM_HEADERS } = SSE_HEADERS;

/** Core's disconnect watch on the Node response under the platform's (Fastify wraps it as `raw`). */
function watchResponse(response: unknown): DisconnectWatch | undefined {
  const raw = (response as { raw?: unknown } | null)?.raw ?? response;
  const isNodeResponse =
    typeof raw === 'object' &&
    raw !== null &&
    typeof (raw as ServerResponse).on === 'function' &&
    'writableFinished' in raw;
  return isNodeResponse ? watchDisconnect(raw as ServerResponse) : undefined;
}

function isAsyncIterator(value: unknown): value is AsyncIterator<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { next?: unknown }).next === 'function';
}

function clientGone(): DOMException {
  return new DOMException('The client closed the connection', 'AbortError');
}
