import type { IncomingMessage, ServerResponse } from 'node:http';
import { type HttpErrorOptions, serveBatched, serverErrorReporter, writeHttpError } from '@microbatch/core/http';
import { prefixCacheTenant } from '../auth/principal.js';
import { type ClientKey, fairnessKeyOf } from './client-key.js';
import { saltedInputs } from './text-generations.js';
import { setDecodeBatchHeaders } from './decode-batch-headers.js';
import type { TextCompletionService } from '../service/text-completion-service.js';
import { parseTextQuery, textQueryAnswer } from './text-query.js';

/**
 * The tutorial's `GET /?text=` on the Node response: `text` as the framework's query parser read it (Express's,
 * Koa's, ...), so each framework keeps its own reading of `?text[]=` or a repeated `text`.
 */
export type TextQueryHandler = (text: unknown, req: IncomingMessage, res: ServerResponse) => Promise<void>;

/**
 * The tutorial's `GET /?text=Once+upon+a+time` on the Node response, the same on every framework: through the
 * service's own batcher (its `maxLatencyMs`, `maxQueueSize` and scheduling apply), each client with a fair share
 * (its address, or `clientKey`), the story as `text/plain` with the `X-Batch-*` headers of the decode-loop batch
 * that ran it, errors mapped by `toHttpError` with `errors`. `HEAD` answers at once: it never runs the model for a
 * response without a body. Server faults (500) are logged with `console.error`, once each, as the frameworks do.
 *
 * @example
 * ```ts
 * const textQuery = createTextQueryHandler(model);
 * app.get('/', (req, res) => textQuery(req.query.text, req, res));
 * ```
 */
export function createTextQueryHandler(
  service: Pick<TextCompletionService, 'generate' | 'validate'>,
  clientKey?: ClientKey,
  errors: HttpErrorOptions = {},
  sharedPrefixCache = false,
): TextQueryHandler {
  const report = serverErrorReporter((error) => console.error(error));
  return (text: unknown, req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method === 'HEAD') {
      res.statusCode = 200;
      res.setHeader('Content-Type', 'text/plain; charset=utf-8');
      res.end();
      return Promise.resolve();
    }
    const fairnessKey = fairnessKeyOf(req, clientKey);
    const tenant = prefixCacheTenant(req, fairnessKey, sharedPrefixCache);
    return serveBatched(service.generate, {
      res,
      readInput: () => {
        const input = parseTextQuery(text, (body) => service.validate(body));
        return saltedInputs({ inputs: [input] }, tenant)[0] ?? input;
      },
      callOptions: () => ({ fairnessKey }),
      setHeaders: (headers) => {
        for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      },
      send: (result) => {
        // Continuous scheduling: the decode loop's batch, not the batcher's single-request dispatch.
        setDecodeBatchHeaders(res, [result]);
        res.statusCode = 200;
        res.setHeader('Content-Type', 'text/plain; charset=utf-8');
        res.end(textQueryAnswer(text, result));
      },
      sendError: (error) => {
        writeHttpError(res, error, errors);
        report(error);
      },
    });
  };
}
