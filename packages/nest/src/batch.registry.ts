import type { BatcherBase } from '@microbatch/core';
import { Inject, Injectable } from '@nestjs/common';
import type { BeforeApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { BATCH_CLASS_OPTIONS, BATCH_MODULE_OPTIONS } from './batch.constants.js';
import { checkController, checkNotScoped } from './batch.checks.js';
import { type BatchModuleOptions, mergeOptions } from './batch.options.js';
import { bindTarget, fieldTargetsOf, routesOf } from './batch.target.js';
import type { AnyBatcher, BatchTarget } from './batch.types.js';

interface Entry {
  readonly instance: object;
  readonly key: string | symbol;
  readonly batcher: AnyBatcher;
}

/**
 * Owns the application's batchers: when the application initializes, it creates one per batched method and
 * `batched()` field of every controller and provider, with the options layered library defaults →
 * `BatchModule.forRoot()` → class-level `@Batch()` → the method's own; before the HTTP server closes, it closes
 * them all, so queued and running batches still answer their requests.
 *
 * @example
 * ```ts
 * const stats = app.get(BatchRegistry).batcherOf(app.get(CompletionController), 'generate')?.stats();
 * ```
 */
@Injectable()
export class BatchRegistry implements OnModuleInit, BeforeApplicationShutdown {
  readonly #options: BatchModuleOptions;
  readonly #discovery: DiscoveryService;
  readonly #entries: Entry[] = [];

  constructor(
    @Inject(BATCH_MODULE_OPTIONS) options: BatchModuleOptions,
    @Inject(DiscoveryService) discovery: DiscoveryService,
  ) {
    this.#options = options;
    this.#discovery = discovery;
  }

  /** Every batcher this registry created, for metrics (`stats()`) and events. */
  get batchers(): readonly BatcherBase[] {
    return this.#entries.map((entry) => entry.batcher);
  }

  /** The batcher of `instance`'s batched method or `batched()` field named `key`. */
  batcherOf(instance: object, key: string | symbol): BatcherBase | undefined {
    return this.#entries.find((entry) => entry.instance === instance && entry.key === key)?.batcher;
  }

  /** Binds every batched method and field; BatchModule is global, so this runs before other modules' hooks. */
  onModuleInit(): void {
    const controllers = this.#discovery.getControllers();
    for (const { metatype } of controllers) checkController(metatype);
    const seen = new Set<object>();
    for (const wrapper of [...controllers, ...this.#discovery.getProviders()]) {
      if (wrapper.isAlias) continue;
      if (!wrapper.isDependencyTreeStatic()) {
        checkNotScoped(wrapper.metatype);
        continue;
      }
      const { instance } = wrapper as { instance: unknown };
      if (typeof instance !== 'object' || instance === null || seen.has(instance)) continue;
      seen.add(instance);
      this.#bindAll(instance);
    }
  }

  /** Drains: queued and running batches finish (new calls get `CLOSED`, 503) before Nest closes the server. */
  async beforeApplicationShutdown(): Promise<void> {
    await Promise.all(this.#entries.map((entry) => entry.batcher.close()));
  }

  #bindAll(instance: object): void {
    const classOptions = Reflect.getMetadata(BATCH_CLASS_OPTIONS, instance.constructor) as object | undefined;
    for (const [key, target] of routesOf(Object.getPrototypeOf(instance))) {
      this.#bind(instance, key, target, classOptions);
    }
    fieldTargetsOf(instance).forEach((target, index) => {
      const holds = (key: string | symbol) => Object.getOwnPropertyDescriptor(instance, key)?.value === target.handle;
      // A field kept in a `#private` slot has no key to find.
      target.key ??= Reflect.ownKeys(instance).find(holds);
      this.#bind(instance, target.key ?? `batched#${index}`, target, classOptions);
    });
  }

  #bind(instance: object, key: string | symbol, target: BatchTarget, classOptions: object | undefined): void {
    const name = `${instance.constructor.name}.${String(key)}`;
    // `onError` is the interceptor's; the batchers get the batching options.
    const { onError: _onError, ...moduleOptions } = this.#options;
    const options = mergeOptions<Record<string, unknown>>(moduleOptions, classOptions, { name }, target.options);
    try {
      this.#entries.push({ instance, key, batcher: bindTarget(instance, target, options) });
    } catch (error) {
      // Each layer was checked where it was written; only their combination can fail here.
      if (!(error instanceof TypeError)) throw error;
      const label = target.handle === undefined ? '@Batch()' : 'batched()';
      const where = `in ${name}, with the options of BatchModule and the class`;
      throw new TypeError(`${label}: ${error.message} (${where})`, { cause: error });
    }
  }
}
