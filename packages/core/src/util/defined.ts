import { fail } from './checks.js';

/**
 * A copy of `object` without its `undefined` entries, so spreading it over defaults keeps the defaults.
 *
 * @example
 * ```ts
 * ({ ...DEFAULTS, ...dropUndefined({ maxBatchSize: undefined, name: 'a' }) }); // DEFAULTS.maxBatchSize kept
 * ```
 */
export function dropUndefined<T extends object>(object: T): Partial<T> {
  const defined: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(object)) if (value !== undefined) defined[key] = value;
  return defined as Partial<T>;
}

/**
 * Checks an options argument (an object or `undefined`) and drops its `undefined` entries.
 *
 * @example
 * ```ts
 * const given = definedEntries('options', options); // TypeError: Expected `options` to be an object, got `1` (number)
 * ```
 */
export function definedEntries<T extends object>(name: string, options: T | undefined): Partial<T> {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null) fail(name, 'an object', options);
  return dropUndefined(options);
}
