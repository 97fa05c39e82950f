import { Get, HttpCode, Next, Res, Sse, UseInterceptors } from '@nestjs/common';

// Nest keeps route metadata under keys that its public entry does not export. Rather than import its internal
// files (whose paths may move in any release), each key is read off what a public decorator writes, once, when
// this module loads; a Nest that changed how its decorators record metadata fails here, loudly, not on a request.

type Decorate = (target: object, key: string | symbol, descriptor: PropertyDescriptor) => unknown;

function probeMethod(decorate: Decorate): Map<string, unknown> {
  const method = function probe(): void {};
  decorate({}, 'probe', { value: method, writable: true, enumerable: false, configurable: true });
  return new Map(Reflect.getOwnMetadataKeys(method).map((key) => [String(key), Reflect.getOwnMetadata(key, method)]));
}

function keyWhere(
  what: string,
  entries: Map<string, unknown>,
  matches: (value: unknown) => boolean,
  except = new Map(),
): string {
  for (const [key, value] of entries) if (!except.has(key) && matches(value)) return key;
  throw new Error(`@microbatch/nest: cannot find the metadata key of ${what} in this version of @nestjs/common`);
}

const PROBE_PATH = 'microbatch-probe';
const PROBE_STATUS = 299;
const route = probeMethod(Get(PROBE_PATH));
class ProbeInterceptor {}

/** Marks a method as a route (`@Get()`, `@Post()`, ...): its value is the path. */
export const PATH_KEY = keyWhere('@Get()', route, (value) => value === PROBE_PATH);
/** The status set by `@HttpCode()`. */
export const HTTP_CODE_KEY = keyWhere(
  '@HttpCode()',
  probeMethod(HttpCode(PROBE_STATUS)),
  (value) => value === PROBE_STATUS,
);
/** Marks an `@Sse()` route. */
export const SSE_KEY = keyWhere('@Sse()', probeMethod(Sse(PROBE_PATH)), (value) => value === true, route);
/** The interceptors of `@UseInterceptors()`, on a method or a class. */
export const INTERCEPTORS_KEY = keyWhere(
  '@UseInterceptors()',
  probeMethod(UseInterceptors(ProbeInterceptor)),
  (value) => Array.isArray(value) && value.includes(ProbeInterceptor),
);
/** The parameter types TypeScript records for a method (`emitDecoratorMetadata`), which pipes validate against. */
export const PARAMTYPES_KEY = 'design:paramtypes';

interface ParameterKeys {
  readonly argsKey: string;
  readonly passthroughKey: string;
  readonly response: string;
  readonly next: string;
}

function probeParameters(): ParameterKeys {
  class Probe {
    plain(): void {}
    passthrough(): void {}
  }
  Res()(Probe.prototype, 'plain', 0);
  Next()(Probe.prototype, 'plain', 1);
  Res({ passthrough: true })(Probe.prototype, 'passthrough', 0);
  const read = (key: string) =>
    new Map(
      Reflect.getOwnMetadataKeys(Probe, key).map((name) => [String(name), Reflect.getOwnMetadata(name, Probe, key)]),
    );
  const plain = read('plain');
  const isArgs = (value: unknown) =>
    typeof value === 'object' &&
    value !== null &&
    Object.keys(value).length === 2 &&
    Object.keys(value).every((entry) => /^\d+:\d+$/.test(entry));
  const argsKey = keyWhere('@Res()', plain, isArgs);
  const passthroughKey = keyWhere('@Res({ passthrough: true })', read('passthrough'), (value) => value === true, plain);
  // Argument entries are keyed `${paramtype}:${index}`.
  const types = Object.keys(plain.get(argsKey) as object).map((entry) => entry.split(':'));
  const typeAt = (index: string) => {
    const found = types.find(([, at]) => at === index)?.[0];
    if (found === undefined) throw new Error('@microbatch/nest: cannot read the parameter types of @Res() and @Next()');
    return found;
  };
  return { argsKey, passthroughKey, response: typeAt('0'), next: typeAt('1') };
}

const parameters = probeParameters();

/**
 * Whether the method `key` of `type` injects the response (`@Res()` without passthrough, or `@Next()`), leaving
 * its answer to the method.
 */
export function takesResponse(type: Function, key: string | symbol): boolean {
  if (Reflect.getMetadata(parameters.passthroughKey, type, key) === true) return false;
  const args = Object.keys((Reflect.getMetadata(parameters.argsKey, type, key) ?? {}) as object);
  return args.some((arg) => {
    const paramtype = arg.split(':')[0];
    return paramtype === parameters.response || paramtype === parameters.next;
  });
}
