/**
 * The injection token of the options given to `BatchModule.forRoot()` (or made by `forRootAsync()`).
 *
 * @example
 * ```ts
 * constructor(@Inject(BATCH_MODULE_OPTIONS) options: BatchModuleOptions) {}
 * ```
 */
export const BATCH_MODULE_OPTIONS: unique symbol = Symbol('microbatch:BATCH_MODULE_OPTIONS');

/** Where class-level `@Batch()` keeps its options (reflect-metadata key on the class). */
export const BATCH_CLASS_OPTIONS = 'microbatch:batch-class-options';

/**
 * The status of a batched route's answer. Nest answers `POST` with 201, but a batched call computes rather than
 * creates, and the Express and Koa adapters answer 200; `@HttpCode()` still wins.
 */
export const BATCH_HTTP_STATUS = 200;
