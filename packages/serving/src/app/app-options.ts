// The options of the ready-made apps (every framework's alike), and the check of the one they share with the
// endpoints' error mapping.
import type { HttpErrorOptions } from '@microbatch/core/http';
import { checkBoolean } from '@microbatch/core/util';
import type { BatchApiOptions } from '../batch-api/batch-api-options.js';
import { type ApiKeyInput, type ApiKeys, toApiKeys } from '../auth/api-keys.js';
import { apiKeyClientKey } from '../auth/route-guard.js';
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
   * The API keys every route but the probes (and `/metrics`, `/dashboard` unless `protectMetrics`) requires, as
   * `Authorization: Bearer <key>`; a request without one of them is answered 401 in OpenAI's shape with
   * `WWW-Authenticate: Bearer`. Bare keys or `{ name, key }`; an `ApiKeys` can be replaced later (a key file
   * re-read). With keys, the default fairness key is the key's name.
   * @default no keys: every request is served
   */
  readonly apiKeys?: ApiKeys | readonly ApiKeyInput[];
  /**
   * With `apiKeys`: whether `/metrics` and `/dashboard` require a key too. Refused without `apiKeys`.
   * @default false
   */
  readonly protectMetrics?: boolean;
  /**
   * Whether all clients share one prefix cache, for a documented system prompt every client sends. Off, each tenant
   * (the API key's name, else the fairness key) reuses only its own cached prompts, so no client can learn from
   * `cached_tokens` or its time to first token whether another sent a prompt; a request's `cache_salt` partitions
   * further within its tenant's.
   * @default false
   */
  readonly sharedPrefixCache?: boolean;
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
  /** The API keys every route but the probes requires (see {@link TextCompletionAppOptions}). */
  readonly apiKeys?: ApiKeys | readonly ApiKeyInput[];
  /**
   * With `apiKeys`: whether `/metrics` requires a key too. Refused without `apiKeys`.
   * @default false
   */
  readonly protectMetrics?: boolean;
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

/**
 * The key options of an app, checked once: `apiKeys` as one `ApiKeys` (or `undefined`), `protectMetrics` a boolean
 * and only with keys, and the fairness key: `clientKey` as given, else the key's name with keys, else the address.
 *
 * @example
 * ```ts
 * const { apiKeys, open, clientKey } = accessOptions({ apiKeys: ['sk-1'] });
 * ```
 */
export function accessOptions(options: {
  readonly apiKeys?: unknown;
  readonly protectMetrics?: unknown;
  readonly clientKey?: ClientKey | undefined;
}): {
  readonly apiKeys: ApiKeys | undefined;
  readonly protectMetrics: boolean;
  readonly clientKey: ClientKey | undefined;
} {
  const apiKeys = toApiKeys(options.apiKeys as ApiKeys | readonly ApiKeyInput[] | undefined);
  const protectMetrics = checkBoolean('protectMetrics', options.protectMetrics ?? false);
  if (protectMetrics && apiKeys === undefined) {
    throw new TypeError('protectMetrics has no effect without apiKeys: there is no key to require');
  }
  const clientKey = options.clientKey ?? (apiKeys === undefined ? undefined : apiKeyClientKey);
  return { apiKeys, protectMetrics, clientKey };
}
