import { Module } from '@nestjs/common';
import type { DynamicModule, FactoryProvider, ModuleMetadata, Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { BATCH_MODULE_OPTIONS } from './batch.constants.js';
import { BatchInterceptor } from './batch.interceptor.js';
import { type BatchModuleOptions, OPTIONS_SCOPES, checkOptions, describe } from './batch.options.js';
import { BatchRegistry } from './batch.registry.js';

/**
 * Options of {@link BatchModule.forRootAsync}: the module defaults, made by a factory with injected dependencies.
 *
 * @example
 * ```ts
 * const options: BatchModuleAsyncOptions = {
 *   imports: [ConfigModule],
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ maxQueueSize: config.get('QUEUE_SIZE') }),
 * };
 * ```
 */
export interface BatchModuleAsyncOptions {
  /**
   * Modules that export what `inject` names.
   * @default []
   */
  readonly imports?: ModuleMetadata['imports'];
  /**
   * The providers passed to `useFactory`, in order.
   * @default []
   */
  readonly inject?: FactoryProvider['inject'];
  /** Makes the module defaults (checked once it resolves). */
  // Nest's own factory providers take `any[]`: the injected values are typed by the factory's parameters.
  readonly useFactory: (...args: any[]) => BatchModuleOptions | Promise<BatchModuleOptions>;
}

/**
 * Makes `@Batch()` and `batched()` work: import it once, in the root module (it is global). It creates the
 * batchers when the application initializes and drains them when it shuts down.
 *
 * @example
 * ```ts
 * @Module({ imports: [BatchModule.forRoot({ batchWaitTimeoutMs: 5 })], controllers: [CompletionController] })
 * class AppModule {}
 * ```
 */
@Module({})
export class BatchModule {
  /**
   * The module with defaults for every batcher of the application.
   *
   * @example
   * ```ts
   * BatchModule.forRoot({ maxBatchSize: 8, maxQueueSize: 256 });
   * ```
   */
  static forRoot(options?: BatchModuleOptions): DynamicModule {
    const checked = checkOptions('BatchModule.forRoot()', options, OPTIONS_SCOPES.module);
    return batchModule({ provide: BATCH_MODULE_OPTIONS, useValue: checked }, []);
  }

  /**
   * The module with defaults made by a factory, for example from configuration.
   *
   * @example
   * ```ts
   * BatchModule.forRootAsync({
   *   imports: [ConfigModule],
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({ maxBatchSize: config.get('BATCH_SIZE') }),
   * });
   * ```
   */
  static forRootAsync(options: BatchModuleAsyncOptions): DynamicModule {
    const label = 'BatchModule.forRootAsync()';
    if (typeof options !== 'object' || options === null || typeof options.useFactory !== 'function') {
      const got = typeof options === 'object' && options !== null ? options.useFactory : options;
      throw new TypeError(`${label}: Expected \`useFactory\` to be a function, got ${describe(got)}`);
    }
    const { useFactory, inject = [], imports = [] } = options;
    return batchModule(
      {
        provide: BATCH_MODULE_OPTIONS,
        inject,
        useFactory: async (...args: unknown[]) => checkOptions(label, await useFactory(...args), OPTIONS_SCOPES.module),
      },
      imports,
    );
  }
}

function batchModule(optionsProvider: Provider, imports: NonNullable<ModuleMetadata['imports']>): DynamicModule {
  return {
    module: BatchModule,
    // Global, so that the interceptor `@Batch()` adds to each route finds the options in every module.
    global: true,
    imports: [DiscoveryModule, ...imports],
    providers: [optionsProvider, BatchRegistry, BatchInterceptor],
    exports: [BATCH_MODULE_OPTIONS, BatchRegistry, BatchInterceptor],
  };
}
