import { HttpCode, UseInterceptors } from '@nestjs/common';
import { BATCH_CLASS_OPTIONS, BATCH_HTTP_STATUS } from './batch.constants.js';
import { BatchInterceptor } from './batch.interceptor.js';
import { HTTP_CODE_KEY, PARAMTYPES_KEY, PATH_KEY } from './batch.metadata.js';
import { type BatchOptions, OPTIONS_SCOPES, checkOptions, describe } from './batch.options.js';
import { methodsOf, routeTargetOf, wrapRoute } from './batch.target.js';

const LABEL = '@Batch()';

/** Options of any arguments' type: `batchKey` and `cost` only ever receive the arguments they were written for. */
type AnyBatchOptions = BatchOptions<never>;

/**
 * Batches a route: Nest invokes it once per request (guards, pipes and validation run per request first), and its
 * body runs once per batch with one array per parameter (one entry per request), followed by the `BatchContext`.
 * It returns one result per request, or is an `async function*` yielding steps (one slot per request) that each
 * client receives as Server-Sent Events. On a class, it batches every route of the class and gives defaults to its
 * method-level `@Batch()` and `batched()` fields. Responds 200 unless `@HttpCode()` says otherwise.
 *
 * @example
 * ```ts
 * @Controller()
 * class CompletionController {
 *   @Post('generate')
 *   @Batch({ maxBatchSize: 4, paramTypes: [GenerateDto] })
 *   async generate(@Body() bodies: GenerateDto[], { signal }: BatchContext): Promise<Completion[]> {
 *     return model.complete(bodies.map((body) => body.prompt), { signal });
 *   }
 * }
 * ```
 */
export function Batch<Args extends readonly unknown[] = any[]>(
  options?: BatchOptions<Args>,
): ClassDecorator & MethodDecorator {
  return ((target: object, key?: string | symbol, descriptor?: PropertyDescriptor): unknown => {
    if (key === undefined || descriptor === undefined) return batchClass(target as Function, options);
    const where = `${target.constructor.name}.${String(key)}`;
    const own: AnyBatchOptions = checkOptions(LABEL, options, OPTIONS_SCOPES.method, where);
    if (typeof descriptor.value !== 'function') {
      throw new TypeError(`${LABEL}: Expected a method, got ${describe(descriptor.value)} (in ${where})`);
    }
    if (routeTargetOf(descriptor.value) !== undefined) {
      throw new TypeError(`${LABEL}: ${where} is decorated with @Batch() twice; keep one`);
    }
    return batchRoute(target, key, descriptor, own);
  }) as ClassDecorator & MethodDecorator;
}

function batchClass(type: Function, options: AnyBatchOptions | undefined): void {
  const own = checkOptions(LABEL, options, OPTIONS_SCOPES.classLevel, type.name);
  Reflect.defineMetadata(BATCH_CLASS_OPTIONS, own, type);
  // Class decorators run after the method decorators, so every route's own metadata is in place by now.
  for (const [key, descriptor] of methodsOf(type.prototype)) {
    const method: unknown = descriptor.value;
    if (!Reflect.hasOwnMetadata(PATH_KEY, method as object) || routeTargetOf(method) !== undefined) continue;
    Object.defineProperty(type.prototype, key, batchRoute(type.prototype as object, key, descriptor, {}));
  }
}

function batchRoute(
  prototype: object,
  key: string | symbol,
  descriptor: PropertyDescriptor,
  own: AnyBatchOptions,
): PropertyDescriptor {
  const { paramTypes, ...options } = own;
  const wrapper = wrapRoute(key, descriptor.value as (...args: unknown[]) => unknown, options);
  const replaced: PropertyDescriptor = { ...descriptor, value: wrapper };
  // `@HttpCode()` applied before `@Batch()` (written below it) was copied onto the wrapper and wins.
  if (!Reflect.hasOwnMetadata(HTTP_CODE_KEY, wrapper)) HttpCode(BATCH_HTTP_STATUS)(prototype, key, replaced);
  if (paramTypes !== undefined) {
    const declared = (Reflect.getMetadata(PARAMTYPES_KEY, prototype, key) ?? []) as unknown[];
    const length = Math.max(declared.length, paramTypes.length);
    const types = Array.from({ length }, (_, index) => paramTypes[index] ?? declared[index]);
    Reflect.defineMetadata(PARAMTYPES_KEY, types, prototype, key);
  }
  UseInterceptors(BatchInterceptor)(prototype, key, replaced);
  return replaced;
}
