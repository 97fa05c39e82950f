/**
 * Whether `value` is an `async function*` (its calls return async generators).
 *
 * @example
 * ```ts
 * isAsyncGeneratorFunction(async function* () {}); // true
 * ```
 */
export function isAsyncGeneratorFunction(value: unknown): boolean {
  return Object.prototype.toString.call(value) === '[object AsyncGeneratorFunction]';
}
