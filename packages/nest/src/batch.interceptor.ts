import { ErrorCode, SSE_HEADERS, batchHeaders, toBatchError, toHttpError } from '@microbatch/core';
import { HttpException, Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { Observable } from 'rxjs';
import { BATCH_MODULE_OPTIONS } from './batch.constants.js';
import type { BatchModuleOptions } from './batch.options.js';
import { toSseBody } from './batch.sse.js';
import { type RequestScope, requestScopes } from './batch.storage.js';
import { routeTargetOf } from './batch.target.js';

const INTERNAL_CODES: ReadonlySet<string> = new Set([ErrorCode.HANDLER_ERROR, ErrorCode.BAD_HANDLER_RESULT]);

/**
 * The HTTP side of `@Batch()`, which applies it to every batched route: hands the request's signal and header sink
 * to the batched method, sets `X-Batch-Size`, `X-Batch-Id` and `X-Queue-Time-Ms`, answers streaming routes with
 * Server-Sent Events, turns batching errors into `HttpException`s with core's statuses and `{"error":{...}}` body,
 * and cancels the request's item when its client goes away. Apply it yourself only to place it among other
 * interceptors; it fails on a route without `@Batch()`.
 *
 * @example
 * ```ts
 * @Controller()
 * @UseInterceptors(LoggingInterceptor, BatchInterceptor) // runs inside LoggingInterceptor
 * class CompletionController {
 *   @Post('generate') @Batch() generate(@Body() bodies: GenerateDto[]) { ... }
 * }
 * ```
 */
@Injectable()
export class BatchInterceptor implements NestInterceptor {
  readonly #adapterHost: HttpAdapterHost;
  readonly #logger = new Logger('BatchInterceptor');
  // A batch that throws fails each of its items with the same error: it is logged once, not once per request.
  readonly #logged = new WeakSet<object>();

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
      const controller = new AbortController();
      let delivered = false;
      const scope: RequestScope = {
        request,
        target,
        signal: controller.signal,
        onDispatch: (info) => this.#setHeaders(response, batchHeaders(info)),
        claimed: false,
      };
      const subscription = requestScopes
        .run(scope, () => next.handle())
        .subscribe({
          next: (value) => {
            delivered = true;
            const streams = target.streaming && isAsyncIterator(value);
            subscriber.next(streams ? this.#sseBody(value, response, controller) : value);
          },
          error: (error: unknown) => {
            delivered = true;
            subscriber.error(this.#toException(error, response));
          },
          complete: () => subscriber.complete(),
        });
      return () => {
        subscription.unsubscribe();
        // Torn down before a result was delivered: Nest saw the client go away.
        if (!delivered) controller.abort(clientGone());
      };
    });
  }

  #sseBody(source: AsyncIterator<unknown>, response: unknown, controller: AbortController): AsyncIterator<string> {
    return toSseBody(source, {
      start: () => this.#setHeaders(response, SSE_HEADERS),
      reject: (error) => this.#toException(error, response),
      report: (error) => this.#logIfInternal(error),
      cancel: () => controller.abort(clientGone()),
    });
  }

  /** Pipes' and handlers' own `HttpException`s pass as they are; everything else is mapped by core's `toHttpError`. */
  #toException(error: unknown, response: unknown): HttpException {
    if (error instanceof HttpException) return error;
    const { status, headers, body } = toHttpError(error);
    this.#setHeaders(response, headers);
    this.#logIfInternal(error);
    return new HttpException(body, status, { cause: error });
  }

  #logIfInternal(error: unknown): void {
    if (error instanceof HttpException || !INTERNAL_CODES.has(toBatchError(error).code)) return;
    if (typeof error === 'object' && error !== null) {
      if (this.#logged.has(error)) return;
      this.#logged.add(error);
    }
    this.#logger.error(error);
  }

  #setHeaders(response: unknown, headers: Readonly<Record<string, string>>): void {
    const adapter = this.#adapterHost.httpAdapter;
    if (adapter.isHeadersSent(response)) return;
    for (const [name, value] of Object.entries(headers)) adapter.setHeader(response, name, value);
  }
}

function isAsyncIterator(value: unknown): value is AsyncIterator<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { next?: unknown }).next === 'function';
}

function clientGone(): DOMException {
  return new DOMException('The client closed the connection', 'AbortError');
}
