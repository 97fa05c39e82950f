import type { ClientKey } from './client-key.js';
import type { CompletionRequestLimits } from './completion-request.js';

/**
 * Options of the ready-made text-completion apps (`@microbatch/serving/express`, `/koa`, `/nest`). Every route of
 * these apps goes through the service's own batchers, which log where the service says (its `log` / `logger`).
 *
 * @example
 * ```ts
 * createTextCompletionApp(model, { limits: { maxPrompts: 4 } });
 * ```
 */
export interface TextCompletionAppOptions {
  /** Bounds of `POST /v1/completions` requests beyond the model's own. */
  readonly limits?: CompletionRequestLimits;
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
}
