import { BatchInterceptor } from './batch.interceptor.js';
import { INTERCEPTORS_KEY, PATH_KEY, SSE_KEY, takesResponse } from './batch.metadata.js';
import { methodsOf, routeTargetOf, routesOf } from './batch.target.js';

// Checks run when the application initializes: these mistakes would otherwise surface on every request, or as
// requests that never get an answer.

/** Fails for a request-scoped class with batched routes: each request would get its own instance and batch alone. */
export function checkNotScoped(metatype: unknown): void {
  if (typeof metatype !== 'function' || routesOf(metatype.prototype).size === 0) return;
  throw new TypeError(
    `@Batch(): ${metatype.name} is request-scoped (or depends on a request-scoped provider), so each request would ` +
      'get its own instance and batch alone; batched classes must be singletons',
  );
}

/** Fails for `BatchInterceptor` on a route without `@Batch()`, and for batched routes Nest would not answer. */
export function checkController(metatype: unknown): void {
  if (typeof metatype !== 'function') return;
  const onClass = usesBatchInterceptor(metatype);
  for (const [key, { value }] of methodsOf(metatype.prototype)) {
    const method = value as Function;
    if (!Reflect.hasOwnMetadata(PATH_KEY, method)) continue;
    const where = `${metatype.name}.${String(key)}`;
    if (routeTargetOf(method) === undefined) {
      if (onClass || usesBatchInterceptor(method)) {
        throw new TypeError(
          `@Batch(): BatchInterceptor is applied to ${where}, which has no @Batch(); decorate the method or its class ` +
            'with @Batch()',
        );
      }
      continue;
    }
    if (Reflect.hasMetadata(SSE_KEY, method)) {
      throw new TypeError(
        `@Batch(): ${where} is an @Sse() route; drop @Sse() and write the method as an async function*, whose ` +
          'values each client receives as Server-Sent Events',
      );
    }
    if (takesResponse(metatype, key)) {
      throw new TypeError(
        `@Batch(): ${where} injects @Res() or @Next(), so Nest would leave each answer to the method, which runs ` +
          'once per batch; return the results instead (@Res({ passthrough: true }) is fine)',
      );
    }
  }
}

function usesBatchInterceptor(target: Function): boolean {
  const interceptors = (Reflect.getMetadata(INTERCEPTORS_KEY, target) ?? []) as unknown[];
  return interceptors.some((used) => used === BatchInterceptor || used instanceof BatchInterceptor);
}
