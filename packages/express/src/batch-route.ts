import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { BatchError, ErrorCode } from '@microbatch/core';
import { batcherForRoute, hasBody, serveBatched } from '@microbatch/core/http';
import type { Batcher, StreamingBatcher } from '@microbatch/core';
import type {
  BatchedExchange,
  BatchRouteOptions as RouteOptions,
  RequestCallOptions,
  ServerErrorListener,
} from '@microbatch/core/http';
import { errorReporter, sendError } from './error-handler.js';

/**
 * Options of {@link batchRoute}: the route's own hooks, plus either `handler` with any core batcher option (the
 * route creates its batcher) or `batcher` alone (an existing one, configured when it was created). Giving neither,
 * both, or batcher options beside `batcher` does not type-check (and throws a `TypeError` at run time): core's strict
 * `BatchRouteOptions` over this adapter's hooks, the same type as Koa's, Fastify's and Hono's.
 *
 * @example
 * ```ts
 * const options: BatchRouteOptions<string, string> = { input: (req) => String(req.body.prompt), handler: generate };
 * ```
 */
export type BatchRouteOptions<I, O> = RouteOptions<I, O, BatchRouteHooks<I, O>>;

/**
 * The hooks of {@link batchRoute} that do not depend on where its batcher comes from.
 *
 * @example
 * ```ts
 * const hooks: BatchRouteHooks<string, string> = { input: (req) => String(req.body.prompt) };
 * ```
 */
export interface BatchRouteHooks<I, O> {
  /**
   * Turns a request into one handler input. Validate here: a throw answers 400 `INVALID_INPUT` with the error's
   * message (a `BatchError` or an `http-errors` error keeps its own code and status).
   * @default (req) => req.body, and a 400 naming `jsonBody()` where it is `undefined` (no body, or none read)
   */
  readonly input?: (req: Request) => I | PromiseLike<I>;
  /**
   * Sends one result. Not used when the batcher streams: each value is sent as one Server-Sent Event.
   * @default (result, req, res) => res.json(result ?? null), so a string result is sent as a JSON string
   */
  readonly output?: (result: O, req: Request, res: Response) => unknown;
  /**
   * Per-request `priority` and `timeoutMs` (a timeout may only lower the batcher's `timeoutMs`).
   * @default () => ({})
   */
  readonly callOptions?: (req: Request) => RequestCallOptions;
  /**
   * Told once about each error this route answers with 500 (a handler that threw or returned a bad result); never
   * about 4xx, 503 or 504 answers. The client only ever sees a generic message.
   * @default (error) => console.error(error), as Express's own final handler logs
   */
  readonly onError?: ServerErrorListener;
}

/**
 * An Express middleware that batches its requests, with the batcher it uses (for stats, events and `close()`).
 *
 * @example
 * ```ts
 * const route: BatchRouteHandler<string, string> = batchRoute({ handler: generate });
 * app.get('/stats', (_req, res) => res.json(route.batcher.stats()));
 * ```
 */
export interface BatchRouteHandler<I, O> extends RequestHandler {
  readonly batcher: Batcher<I, O> | StreamingBatcher<I, O>;
}

const ROUTE_NAME = 'batchRoute';

/**
 * Creates Express middleware that coalesces concurrent requests into batched handler calls and answers each with
 * its own result, with `X-Batch-Size`, `X-Batch-Id` and `X-Queue-Time-Ms` headers. Errors are answered as
 * `{"error":{"code","message"}}` with the status from `toHttpError`; a client that disconnects cancels its item.
 *
 * @example
 * ```ts
 * app.post('/generate', express.json(), batchRoute({
 *   input: (req) => parsePrompt(req.body),
 *   handler: async (prompts: string[], { signal }) => model(prompts, { signal }),
 *   maxBatchSize: 4,
 *   batchWaitTimeoutMs: 5,
 * }));
 * ```
 */
export function batchRoute<I, O>(options: BatchRouteOptions<I, O>): BatchRouteHandler<I, O> {
  const report = errorReporter(ROUTE_NAME, options);
  const { onError: _onError, ...routeOptions } = options;
  const batcher = batcherForRoute<I, O>(ROUTE_NAME, routeOptions);
  const { input = defaultInput as (req: Request) => I, output, callOptions } = routeOptions;
  const hooks: Route<I, O> = { input, send: output ?? defaultOutput, callOptions, report };

  // Never returns a rejected promise: Express 4 would not catch it, and every failure is answered here anyway.
  const route = (req: Request, res: Response, _next: NextFunction): void => {
    void serveBatched<I, O>(batcher, new ExpressExchange(hooks, req, res));
  };
  return Object.defineProperty(route, 'batcher', { value: batcher, enumerable: true }) as BatchRouteHandler<I, O>;
}

/** What a route does with each request, fixed when the route is made. */
interface Route<I, O> {
  readonly input: (req: Request) => I | PromiseLike<I>;
  readonly send: (result: O, req: Request, res: Response) => unknown;
  readonly callOptions: ((req: Request) => RequestCallOptions) | undefined;
  readonly report: (error: unknown) => void;
}

/** One request's exchange: a class, so a request allocates one object rather than a closure per hook. */
class ExpressExchange<I, O> implements BatchedExchange<I, O> {
  readonly #route: Route<I, O>;
  readonly #req: Request;
  readonly res: Response;

  constructor(route: Route<I, O>, req: Request, res: Response) {
    this.#route = route;
    this.#req = req;
    this.res = res;
  }

  readInput(): I | PromiseLike<I> {
    return this.#route.input(this.#req);
  }

  callOptions(): RequestCallOptions | undefined {
    return this.#route.callOptions?.(this.#req);
  }

  setHeaders(headers: Record<string, string>): void {
    // Plain string headers, none of them Content-Type: what `res.set` would do, without its per-header wrapper calls.
    const { res } = this;
    for (const name in headers) res.setHeader(name, headers[name] as string);
  }

  send(result: O): unknown {
    return this.#route.send(result, this.#req, this.res);
  }

  sendError(error: unknown): void {
    sendError(this.res, error);
    this.#route.report(error);
  }
}

function defaultInput(req: Request): unknown {
  if (req.body !== undefined) return req.body;
  throw missingBody(hasBody(req));
}

function defaultOutput(result: unknown, _req: Request, res: Response): void {
  res.json(result ?? null);
}

/**
 * The 400 of a route whose default `input` found no body: none was sent, or one was sent and nothing read it (no
 * `jsonBody()` (or `express.json()`) before the route). Never `undefined` handed to the handler with a 200.
 */
function missingBody(sent: boolean): BatchError {
  return new BatchError(
    ErrorCode.INVALID_INPUT,
    sent
      ? 'The request body was not read: the server must mount `jsonBody()` (or `express.json()`) before `batchRoute` (or give it an `input`)'
      : 'Expected a JSON request body, got none',
    { details: { field: 'body' } },
  );
}
