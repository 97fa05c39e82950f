import { createBatcher, createStreamingBatcher } from '@microbatch/core';
import type { BatchContext } from '@microbatch/core';
import { isAsyncGeneratorFunction } from '@microbatch/core/util';
import { defer } from 'rxjs';
import { claimRequestScope } from './batch.storage.js';
import type { AnyBatcher, BatchTarget } from './batch.types.js';

// Batchers live per (instance, target) rather than per class: two instances of a class (two modules, two test
// applications) must not share a queue, and one that is garbage-collected takes its batchers with it.
const bindings = new WeakMap<object, Map<BatchTarget, AnyBatcher>>();
// Kept as metadata rather than in a WeakMap: a decorator applied above `@Batch()` that wraps the method again and
// copies its metadata (as Nest-aware ones do) keeps the route batched.
const ROUTE_TARGET_METADATA = Symbol('microbatch:route-target');
const fieldTargets = new WeakMap<object, BatchTarget[]>();

/** Creates the batcher of `target` for `instance` and remembers it for the calls that follow. */
export function bindTarget(instance: object, target: BatchTarget, options: object): AnyBatcher {
  const handler = (inputs: unknown[], context: BatchContext) => target.run(instance, inputs, context);
  const batcher: AnyBatcher = target.streaming
    ? createStreamingBatcher(handler as (inputs: unknown[], context: BatchContext) => AsyncIterable<unknown[]>, options)
    : createBatcher(handler as (inputs: unknown[], context: BatchContext) => Promise<unknown[]>, options);
  let targets = bindings.get(instance);
  if (targets === undefined) bindings.set(instance, (targets = new Map()));
  targets.set(target, batcher);
  return batcher;
}

/** The batcher bound for `target` on `instance`, if the registry bound one. */
export function boundBatcher(instance: object, target: BatchTarget): AnyBatcher | undefined {
  return bindings.get(instance)?.get(target);
}

/** The target behind a method wrapped by `@Batch()`. */
export function routeTargetOf(fn: unknown): BatchTarget | undefined {
  return typeof fn === 'function'
    ? (Reflect.getOwnMetadata(ROUTE_TARGET_METADATA, fn) as BatchTarget | undefined)
    : undefined;
}

/** The `batched()` fields created for `instance`, in creation order. */
export function fieldTargetsOf(instance: object): readonly BatchTarget[] {
  return fieldTargets.get(instance) ?? [];
}

/**
 * Every method of a prototype chain with its descriptor, nearest definition first (an override hides the method it
 * overrides). Descriptors are read rather than properties, so no getter runs.
 */
export function* methodsOf(prototype: unknown): Generator<[key: string | symbol, descriptor: PropertyDescriptor]> {
  const seen = new Set<string | symbol>(['constructor']);
  for (let proto = prototype; isObject(proto) && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const key of Reflect.ownKeys(proto)) {
      const descriptor = Object.getOwnPropertyDescriptor(proto, key);
      if (seen.has(key) || typeof descriptor?.value !== 'function') continue;
      seen.add(key);
      yield [key, descriptor];
    }
  }
}

/** The batched methods of a prototype chain, by name. */
export function routesOf(prototype: unknown): Map<string | symbol, BatchTarget> {
  const routes = new Map<string | symbol, BatchTarget>();
  for (const [key, { value }] of methodsOf(prototype)) {
    const target = routeTargetOf(value);
    if (target !== undefined) routes.set(key, target);
  }
  return routes;
}

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

/** Records a `batched()` field of `owner`. */
export function addFieldTarget(owner: object, target: BatchTarget): void {
  const targets = fieldTargets.get(owner);
  if (targets === undefined) fieldTargets.set(owner, [target]);
  else targets.push(target);
}

/**
 * Replaces a route method by one that Nest calls once per request (after guards and pipes) and that enqueues that
 * request's arguments; the original runs once per batch with one array per parameter, then the `BatchContext`.
 * The wrapper carries the original's metadata, so decorators applied before `@Batch()` still count.
 */
export function wrapRoute(key: string | symbol, method: (...args: unknown[]) => unknown, options: object): Function {
  const target: BatchTarget = {
    key,
    streaming: isAsyncGeneratorFunction(method),
    options,
    run: (instance, inputs, context) => method.apply(instance, [...columns(inputs as unknown[][]), context]),
  };
  const wrapper = function batchedRoute(this: object, ...args: unknown[]): unknown {
    return enqueue(this, target, args);
  };
  Object.defineProperty(wrapper, 'name', { value: method.name, configurable: true });
  for (const metadataKey of Reflect.getOwnMetadataKeys(method)) {
    Reflect.defineMetadata(metadataKey, Reflect.getOwnMetadata(metadataKey, method), wrapper);
  }
  Reflect.defineMetadata(ROUTE_TARGET_METADATA, target, wrapper);
  return wrapper;
}

function enqueue(instance: object, target: BatchTarget, args: unknown[]): unknown {
  const batcher = boundBatcher(instance, target);
  if (batcher === undefined) {
    const name = `${instance?.constructor?.name ?? 'unknown'}.${String(target.key)}`;
    throw new TypeError(
      `@Batch(): ${name} was called on an instance that BatchModule does not manage; import BatchModule.forRoot() ` +
        'and let Nest create the class as a singleton (the default scope)',
    );
  }
  const scope = claimRequestScope(target);
  const options = scope && { signal: scope.signal, onDispatch: scope.onDispatch };
  if (batcher.streaming) return batcher.stream(args, options);
  if (scope === undefined) return batcher.call(args);
  // Nest stops waiting for an Observable the handler returned once the client goes away (a promise it would await
  // to the end), which tears the interceptor down and aborts `scope.signal`.
  return defer(() => batcher.call(args, options));
}

/** Per-request argument lists in, one array per parameter out: `[[a1, b1], [a2, b2]]` → `[[a1, a2], [b1, b2]]`. */
function columns(inputs: readonly unknown[][]): unknown[][] {
  const arity = inputs.reduce((longest, args) => Math.max(longest, args.length), 0);
  return Array.from({ length: arity }, (_, index) => inputs.map((args) => args[index]));
}
