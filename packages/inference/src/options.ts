// Option checks shared by the pool, the runners and the request validators. Misuse by the programmer is a
// `TypeError` thrown once, at creation, in the house style: Expected `size` to be an integer >= 1, got `0` (number).

/** Renders a value for a misuse message: `` `0` (number)``. */
export function describe(value: unknown): string {
  let shown: string;
  if (typeof value === 'string') shown = JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  else if (typeof value === 'function') shown = 'function';
  else if (Array.isArray(value)) shown = `[array of ${value.length}]`;
  else if (typeof value === 'object' && value !== null) shown = '[object]';
  else shown = String(value);
  return `\`${shown}\` (${value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value})`;
}

/** Throws the house-style `TypeError` for an option that fails its check. */
export function fail(name: string, expectation: string, value: unknown): never {
  throw new TypeError(`Expected \`${name}\` to be ${expectation}, got ${describe(value)}`);
}

/** Checks an integer `>= min` (and `<= max` when given). */
export function checkInteger(name: string, value: unknown, min: number, max = Number.POSITIVE_INFINITY): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    fail(name, max === Number.POSITIVE_INFINITY ? `an integer >= ${min}` : `an integer from ${min} to ${max}`, value);
  }
  return value;
}

/** Checks a finite number `>= min` (or `> min` when `exclusive`), and `<= max`. */
export function checkNumber(name: string, value: unknown, min: number, max: number, exclusive = false): number {
  const ok = typeof value === 'number' && Number.isFinite(value) && (exclusive ? value > min : value >= min) && value <= max;
  if (!ok) fail(name, `a number ${exclusive ? '>' : '>='} ${min} and <= ${max}`, value);
  return value as number;
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

/** Checks an array of non-empty strings. */
export function checkStringArray(name: string, value: unknown): readonly string[] {
  if (!Array.isArray(value) || value.some((item) => typeof item !== 'string' || item.length === 0)) {
    fail(name, 'an array of non-empty strings', value);
  }
  return value as readonly string[];
}

/** Checks an options argument and drops its `undefined` entries, so spreading it over the defaults is safe. */
export function definedEntries<T extends object>(name: string, options: T | undefined): Partial<T> {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null) fail(name, 'an object', options);
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}
