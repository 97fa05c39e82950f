/**
 * The injection token of the app's `TextCompletionService`.
 *
 * @example
 * ```ts
 * constructor(@Inject(TEXT_COMPLETION_SERVICE) private readonly service: TextCompletionService) {}
 * ```
 */
export const TEXT_COMPLETION_SERVICE = Symbol.for('microbatch.serving.textCompletionService');

/**
 * The injection token of the app's `TextCompletionAppOptions` (optional: absent, the defaults).
 *
 * @example
 * ```ts
 * constructor(@Optional() @Inject(TEXT_COMPLETION_APP_OPTIONS) options?: TextCompletionAppOptions) {}
 * ```
 */
export const TEXT_COMPLETION_APP_OPTIONS = Symbol.for('microbatch.serving.textCompletionAppOptions');
