import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { batcherForRoute, serveBatched } from '@microbatch/core';
import type { Batcher, RequestCallOptions, RouteBatcherOptions, StreamingBatcher } from '@microbatch/core';
import { sendError } from './error-handler.js';

/**
 * Options of {@link batchRoute}: the route's own, plus `handler` and every core batcher option, or `batcher`.
 *
 * @example
 * ```ts
 * const options: BatchRouteOptions<string, string> = { input: (req) => String(req.body.prompt), handler: generate };
 * ```
 */
export interface BatchRouteOptions<I, O> extends RouteBatcherOptions<I, O> {
  /**
   * Turns a request into one handler input. Validate here: a throw answers 400 `INVALID_INPUT` with the error's
   * message (a `BatchError` or an `http-errors` error keeps its own code and status).
   * @default (req) => req.body
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
  const batcher = batcherForRoute<I, O>(ROUTE_NAME, options);
  const { input = defaultInput as (req: Request) => I, output, callOptions } = options;
  const send = output ?? defaultOutput;

  function serve(req: Request, res: Response): Promise<void> {
    return serveBatched<I, O>(batcher, {
      res,
      readInput: () => input(req),
      callOptions: () => callOptions?.(req),
      setHeaders: (headers) => res.set(headers),
      send: (result) => send(result, req, res),
      sendError: (error) => sendError(res, error),
    });
  }

  // Never returns a rejected promise: Express 4 would not catch it, and every failure is answered here anyway.
  const route = (req: Request, res: Response, _next: NextFunction): void => {
    void serve(req, res);
  };
  return Object.defineProperty(route, 'batcher', { value: batcher, enumerable: true }) as BatchRouteHandler<I, O>;
}

function defaultInput(req: Request): unknown {
  return req.body;
}

function defaultOutput(result: unknown, _req: Request, res: Response): void {
  res.json(result ?? null);
}
