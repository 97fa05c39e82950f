/**
 * The injection token of the app's `TextCompletionService`.
 *
 * @example
 * ```ts
 * constructor(@Inject(TEXT_COMPLETION_SERVICE) private readonly service: TextCompletionService) {}
 * ```
 */
export const TEXT_COMPLETION_SERVICE = Symbol.for('microbatch.serving.textCompletionService');
