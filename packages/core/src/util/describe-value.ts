/**
 * Renders a value for a misuse or validation message, as every microbatch `TypeError` does: the value (strings
 * and arrays as JSON, at most 200 characters) and its type (`array` and `null` named as such).
 *
 * @example
 * ```ts
 * describeValue(0); // '`0` (number)'
 * describeValue([1, 2]); // '`[1,2]` (array)'
 * ```
 */
export function describeValue(value: unknown): string {
  return `\`${show(value)}\` (${value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value})`;
}

const MAX_SHOWN = 200;

/** `String(value)`, except that it never throws and never runs long: request bodies reach here too. */
function show(value: unknown): string {
  if (typeof value === 'function') return 'function';
  let shown: string;
  try {
    shown = typeof value === 'string' || Array.isArray(value) ? JSON.stringify(value) : String(value);
  } catch {
    // JSON such as {"toString": 1} has no callable toString/valueOf, and arrays nested thousands deep overflow
    // the stack: both throw, and a message about a bad value must not.
    return Array.isArray(value) ? `[array of ${value.length}]` : '[object]';
  }
  if (shown.length <= MAX_SHOWN) return shown;
  return Array.isArray(value) ? `[array of ${value.length}]` : `${shown.slice(0, MAX_SHOWN - 3)}...`;
}
