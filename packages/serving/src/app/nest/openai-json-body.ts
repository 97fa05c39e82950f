// Nest middleware reading the JSON bodies of the OpenAI routes with core's reader (as `@microbatch/nest`'s
// `jsonBody()`), a refused body (400, 413, 415) answered in OpenAI's shape, as every framework's app answers there.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { jsonBodyMiddleware } from '@microbatch/core/http';
import { writeOpenAiError } from '../../openai/openai-error.js';

/**
 * The body of a `/v1/*` route (64 KiB at most, fixed messages that never quote the body), or its refusal in
 * OpenAI's shape. Create the app with `bodyParser: false`, so that Nest's parser does not read the body first.
 *
 * @example
 * ```ts
 * consumer.apply(openAiJsonBody()).forRoutes({ path: 'v1/embeddings', method: RequestMethod.POST });
 * ```
 */
export function openAiJsonBody(): (
  req: IncomingMessage & { body?: unknown },
  res: ServerResponse,
  next: () => void,
) => void {
  const read = jsonBodyMiddleware();
  return (req, res, next) => {
    read(req, res, (error?: unknown) => {
      if (error === undefined) next();
      else writeOpenAiError(res, error);
    });
  };
}
