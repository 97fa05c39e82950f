import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { BatchError, describeValue as describe, isBatchError, isBatcher, type BatcherBase } from '@microbatch/core';
import { fromBodyParserError, lingerAfterRefusal, readJsonBody, routeNotFound } from '@microbatch/core/http';
import type { ServerErrorListener } from '@microbatch/core/http';
import { sendError } from './batch-route.js';
import { errorReporter } from './error-reporter.js';

/**
 * Options of the {@link microbatch} plugin.
 *
 * @example
 * ```ts
 * await app.register(microbatch, { onError: (error) => metrics.faults.inc() } satisfies MicrobatchPluginOptions);
 * ```
 */
export interface MicrobatchPluginOptions {
  /**
   * Reads `application/json` and `application/*+json` bodies with the same checks and answers as the other
   * adapters' `jsonBody` (415 for another media type, a charset other than UTF-8 or an unknown `Content-Encoding`;
   * gzip, deflate and br bodies decoded; 413 over Fastify's `bodyLimit`, as sent and decompressed; 400 for bytes or
   * text that are not JSON), in place of Fastify's JSON and text parsers. `false` keeps Fastify's parsers (their
   * errors are still answered in the project's shape).
   * @default true
   */
  readonly json?: boolean;
  /**
   * Answers requests no route matches with 404 `{"error":{"code":"NOT_FOUND","message":"No route for GET /x"}}`.
   * @default true
   */
  readonly notFound?: boolean;
  /**
   * Told once about each error the plugin's error handler answers with 500; never about 4xx, 503 or 504 answers.
   * @default (error, request) => request.log.error(error), Fastify's own logger
   */
  readonly onError?: ServerErrorListener;
}

const PLUGIN_NAME = '@microbatch/fastify';
const OWN_OPTIONS = new Set(['json', 'notFound', 'onError']);
// What Fastify's `register` itself takes, and passes on to the plugin with its own options.
const REGISTER_OPTIONS = new Set(['prefix', 'logLevel', 'logSerializers']);

/**
 * Answers every error in the plugin's scope as `{"error":{"code","message"}}` (Fastify's body, validation and
 * not-found errors included, with fixed messages that never quote the body), reads JSON bodies within Fastify's
 * `bodyLimit` (see {@link MicrobatchPluginOptions.json}), and closes every batcher of a `batchRoute` registered after
 * it when the app closes, letting queued and running work finish (`onClose`). Wrapped with `fastify-plugin`, so it
 * applies to the scope it is registered in.
 *
 * @example
 * ```ts
 * const app = Fastify({ bodyLimit: 16 * 1024 });
 * await app.register(microbatch);
 * app.post('/generate', batchRoute({ handler: generate, maxBatchSize: 8 }));
 * await app.listen({ port: 3000 });
 * // later: await app.close(), which drains the route's batcher
 * ```
 */
export const microbatch = fp<MicrobatchPluginOptions>(microbatchPlugin, { name: PLUGIN_NAME, fastify: '5.x' });

async function microbatchPlugin(fastify: FastifyInstance, options: MicrobatchPluginOptions): Promise<void> {
  const report = errorReporter('microbatch', options);
  const { json = true, notFound = true } = options;
  for (const key of Object.keys(options)) {
    if (!OWN_OPTIONS.has(key) && !REGISTER_OPTIONS.has(key)) {
      throw new TypeError(
        `Unknown option \`${key}\` of \`microbatch\` (it takes \`json\`, \`notFound\` and \`onError\`; set Fastify's \`bodyLimit\` on the server or the route)`,
      );
    }
  }
  checkBoolean('json', json);
  checkBoolean('notFound', notFound);

  const batchers = new Set<BatcherBase>();
  fastify.addHook('onRoute', (route) => {
    const { batcher } = route.handler as { batcher?: unknown };
    if (isBatcher(batcher)) batchers.add(batcher);
  });
  // Every batcher at once: each finishes its queued and running work before the app is closed.
  fastify.addHook('onClose', async () => {
    await Promise.all([...batchers].map((batcher) => batcher.close()));
  });

  if (json) {
    fastify.removeContentTypeParser(['application/json', 'text/plain']);
    const parse = (request: FastifyRequest): Promise<unknown> =>
      readJsonBody(request.raw, { limit: request.routeOptions.bodyLimit });
    fastify.addContentTypeParser('application/json', parse);
    fastify.addContentTypeParser(/^application\/[\w.+-]+\+json$/i, parse);
  }

  fastify.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const mapped = fromFastifyError(error, json, request.routeOptions.bodyLimit);
    if (isBatchError(mapped, 'ITEM_TOO_LARGE')) {
      // Fastify closes the connection after a body error; with a client still sending, that resets the connection
      // and the client loses the 413. Node discards the rest of the body instead (bounded by `requestTimeout`).
      reply.removeHeader('connection');
      lingerAfterRefusal(reply.raw, mapped);
    }
    sendError(reply, mapped);
    report(mapped, request);
  });

  if (notFound) {
    fastify.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
      sendError(reply, routeNotFound(request.method, request.url.split('?', 1)[0] ?? '/'));
    });
  }
}

/** Fastify's own errors, answered with the messages the other adapters use; anything else as it is. */
function fromFastifyError(error: unknown, json: boolean, limit: number): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  switch (code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new BatchError(
        'UNSUPPORTED_MEDIA_TYPE',
        json ? 'Expected a JSON body with Content-Type: application/json' : 'Unsupported media type',
        { cause: error },
      );
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return fromBodyParserError(
        Object.assign(new Error('Request body is too large'), { type: 'entity.too.large', limit }),
      );
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new BatchError('INVALID_INPUT', 'The request body is not valid JSON', { cause: error });
    case 'FST_ERR_HANDLER_TIMEOUT':
      return new BatchError('DEADLINE_EXCEEDED', "The request took longer than the route's handlerTimeout", {
        cause: error,
      });
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new BatchError('INVALID_INPUT', 'The request body does not match its Content-Length', { cause: error });
    default:
      return fromBodyParserError(error);
  }
}

function checkBoolean(name: string, value: unknown): void {
  if (typeof value !== 'boolean') {
    throw new TypeError(`Expected \`${name}\` of \`microbatch\` to be a boolean, got ${describe(value)}`);
  }
}
