import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  type OnApplicationShutdown,
  type Type,
} from '@nestjs/common';

/** What the app's service must do at shutdown (a text-completion service, an embedding model). */
interface ClosableService {
  drain(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A provider that drains the service under `token` with the app's own shutdown (`app.close()`: the batchers finish
 * what they accepted), then releases it (worker threads, model sessions).
 *
 * @example
 * ```ts
 * providers: [{ provide: EMBEDDING_SERVICE, useValue: model }, serviceLifecycle(EMBEDDING_SERVICE)]
 * ```
 */
export function serviceLifecycle(token: symbol): Type<BeforeApplicationShutdown & OnApplicationShutdown> {
  @Injectable()
  class ServiceLifecycle implements BeforeApplicationShutdown, OnApplicationShutdown {
    constructor(@Inject(token) private readonly service: ClosableService) {}

    beforeApplicationShutdown(): Promise<void> {
      return this.service.drain();
    }

    onApplicationShutdown(): Promise<void> {
      return this.service.close();
    }
  }
  return ServiceLifecycle;
}
