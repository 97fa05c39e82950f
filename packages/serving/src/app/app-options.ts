// The options of the ready-made apps (every framework's alike), and the check of the one they share with the
// endpoints' error mapping.
import type { HttpErrorOptions } from '@microbatch/core/http';
import { checkBoolean } from '@microbatch/core/util';
import type { BatchApiOptions } from '../batch-api/batch-api-options.js';
import type { ClientKey } from '../endpoints/client-key.js';
import type { ChatRequestLimits } from '../openai/chat-request.js';
import type { CompletionRequestLimits } from '../openai/completion-request.js';
import type { EmbeddingsRequestLimits } from '../openai/embeddings-request.js';

/**
 * Options of the ready-made text-completion apps (`@microbatch/serving/express`, `/koa`, `/fastify`, `/hono`,
 * `/nest`). Every route of these apps goes through the service's own batchers, which log where the service says
 * (its `log` / `logger`).
 *
 * @example
 * ```ts
 * createTextCompletionApp(model, { limits: { maxPrompts: 4 } });
 * ```
 */
export interface TextCompletionAppOptions {
  /** Bounds of `POST /v1/completions` requests beyond the model's own. */
  readonly limits?: CompletionRequestLimits;
  /** Bounds of `POST /v1/chat/completions` requests beyond the model's own. */
  readonly chatLimits?: ChatRequestLimits;
  /**
   * Who a request comes from, for fair shares of the queue and of each batch (`clientKeyFromHeader('x-api-key-id')`
   * behind a trusted proxy). OpenAI's `user` field is never the key.
   * @default the client's address
   */
  readonly clientKey?: ClientKey;
  /**
   * What `/readyz` means (see `createHealth`'s `mode`): `'instance'` also goes unready under overload; `'fleet'` only
   * while the app cannot serve at all, overload being answered by 503s, so a fleet behind a load balancer never goes
   * unready all at once. `microbatch serve` uses `'fleet'` unless `--readiness instance`.
   * @default 'instance'
   */
  readonly readiness?: 'instance' | 'fleet';
  /**
   * Whether a refusal (503) says what the engine said: the batcher's own message and its figures (`details`:
   * `predictedMs`, `limitMs`, queue sizes), for development or an internal service. Off, a 503 says only what a
   * client can act on: its `code`, a fixed message and `retryAfterSeconds`. A 500 never shows its internals.
   * @default false
   */
  readonly exposeDetails?: boolean;
  /**
   * OpenAI's Files and Batch APIs (`/v1/files`, `/v1/batches`), kept under `dataDir`: batch lines run on spare
   * capacity, at the lowest priority, through the same endpoints as interactive requests. Absent, those routes
   * answer 404 saying how to turn them on.
   */
  readonly batchApi?: BatchApiOptions;
}

/**
 * Options of the ready-made embeddings apps.
 *
 * @example
 * ```ts
 * createEmbeddingsApp(model, { exposeDetails: process.env.NODE_ENV === 'development' });
 * ```
 */
export interface EmbeddingsAppOptions {
  /** Bounds of `POST /v1/embeddings` requests beyond the model's own. */
  readonly limits?: EmbeddingsRequestLimits;
  /**
   * Who a request comes from, for fair shares of the queue and of each batch (see {@link TextCompletionAppOptions}).
   * OpenAI's `user` field is never the key.
   * @default the client's address
   */
  readonly clientKey?: ClientKey;
  /**
   * Whether a refusal (503) shows the engine's own message and `details` (see {@link TextCompletionAppOptions}).
   * @default false
   */
  readonly exposeDetails?: boolean;
  /**
   * OpenAI's Files and Batch APIs for `/v1/embeddings` lines, kept under `dataDir` (see
   * {@link TextCompletionAppOptions}). Absent, those routes answer 404 saying how to turn them on.
   */
  readonly batchApi?: BatchApiOptions;
}

/**
 * The error mapping an app's options ask for (`toHttpError`'s options), `exposeDetails` checked: a value other than
 * a boolean is refused with a `TypeError` naming it, rather than read as off.
 *
 * @example
 * ```ts
 * httpErrorOptions({ exposeDetails: true }); // { exposeDetails: true }
 * ```
 */
export function httpErrorOptions(options: { readonly exposeDetails?: unknown }): HttpErrorOptions {
  const { exposeDetails = false } = options;
  return { exposeDetails: checkBoolean('exposeDetails', exposeDetails) };
}
