// The option checks of every package. One meaning for the arguments everywhere: `min` and `max` bound the value
// inclusively (`exclusiveMin` makes the lower bound strict); `Infinity` passes only when `max` is `Infinity`, so
// `MAX_FINITE` as `max` means "any finite number".
import { describeValue } from './describe-value.js';

/** The largest finite number: as `max`, it admits every finite value and refuses `Infinity`. */
export const MAX_FINITE = Number.MAX_VALUE;

/**
 * Throws the house-style `TypeError` for a value that fails its check.
 *
 * @example
 * ```ts
 * fail('size', 'an integer >= 1', 0); // TypeError: Expected `size` to be an integer >= 1, got `0` (number)
 * ```
 */
export function fail(name: string, expectation: string, value: unknown): never {
  throw new TypeError(`Expected \`${name}\` to be ${expectation}, got ${describeValue(value)}`);
}

function range(min: number, max: number, exclusiveMin: boolean): string {
  const low = min === Number.NEGATIVE_INFINITY || min === -MAX_FINITE ? '' : ` ${exclusiveMin ? '>' : '>='} ${min}`;
  if (max === Number.POSITIVE_INFINITY || max === MAX_FINITE) return low;
  return low === '' ? ` <= ${max}` : `${low} and <= ${max}`;
}

/**
 * Checks an integer `>= min` and `<= max`.
 *
 * @example
 * ```ts
 * checkInteger('maxBatchSize', 0, 1); // TypeError: Expected `maxBatchSize` to be an integer >= 1, got `0` (number)
 * ```
 */
export function checkInteger(name: string, value: unknown, min: number, max = Number.POSITIVE_INFINITY): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(name, `an integer${range(min, max, false)}`, value);
  }
  return value;
}

/**
 * Checks a number `>= min` (`> min` with `exclusiveMin`) and `<= max`; NaN never passes, `Infinity` only when
 * `max` is `Infinity`.
 *
 * @example
 * ```ts
 * checkNumber('timeoutMs', 0, 0, Infinity, true); // TypeError: Expected `timeoutMs` to be a number > 0, got `0` (number)
 * checkNumber('batchWaitTimeoutMs', -1, 0, MAX_FINITE); // ... to be a finite number >= 0, got `-1` (number)
 * ```
 */
export function checkNumber(
  name: string,
  value: unknown,
  min: number,
  max = Number.POSITIVE_INFINITY,
  exclusiveMin = false,
): number {
  const ok =
    typeof value === 'number' && !Number.isNaN(value) && (exclusiveMin ? value > min : value >= min) && value <= max;
  if (!ok) fail(name, `a ${max === MAX_FINITE ? 'finite ' : ''}number${range(min, max, exclusiveMin)}`, value);
  return value;
}

/** Checks a function. */
export function checkFunction(name: string, value: unknown): void {
  if (typeof value !== 'function') fail(name, 'a function', value);
}

/**
 * Checks a function or `undefined`.
 *
 * @example
 * ```ts
 * checkOptionalFunction('output', 1); // TypeError: Expected `output` to be a function, got `1` (number)
 * ```
 */
export function checkOptionalFunction(name: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') fail(name, 'a function', value);
}

/** Checks a non-empty string. */
export function checkString(name: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) fail(name, 'a non-empty string', value);
  return value;
}

/** Checks a boolean. */
export function checkBoolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') fail(name, 'a boolean', value);
  return value;
}

/** Checks one of a fixed set of strings. */
export function checkOneOf<T extends string>(name: string, value: unknown, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) fail(name, `one of ${allowed.map((v) => `'${v}'`).join(', ')}`, value);
  return value as T;
}

/** Whether `value` is a non-null object or a function (batchers are callable). */
export function isObjectLike(value: unknown): value is Record<PropertyKey, unknown> {
  return (typeof value === 'object' && value !== null) || typeof value === 'function';
}

/**
 * Whether `value` is a thenable: what may be awaited. Callers await only then, since each await costs a turn and most
 * values are ready.
 *
 * @example
 * ```ts
 * const input = isPromiseLike(read) ? await read : read;
 * ```
 */
export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}
