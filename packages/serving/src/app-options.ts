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
}
