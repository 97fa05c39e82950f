// Integer bounds, enforced exactly. XGrammar 0.1.27 turns `minimum` / `maximum` of an integer into a digit pattern
// that is wrong for some bounds (measured: `maximum: 120` lets 121-129 through, `minimum: 7` lets 1-6 through,
// `minimum: -5` refuses -5..-1), so such a schema is compiled with each bounded integer as the `enum` of its values,
// and only the bounds that can be written so (or `minimum: 0` alone, which it gets right) are accepted. Likewise
// a string with `minLength` / `maxLength` (and no `pattern`): XGrammar's rule for it lets raw control characters
// through, which JSON forbids, and counts a byte-level vocabulary's partial UTF-8 bytes as characters (the decoded
// text then has more characters than `maxLength`: measured on GPT-2's vocabulary), so it is compiled as a pattern of
// printable ASCII characters (no `"` or `\`), which every byte-level and most other vocabularies can spell.

/** The most values an integer range may have (each is one alternative of the grammar). */
export const MAX_INTEGER_RANGE = 1024;

/** Keywords that hold subschemas, as `schema-keywords.ts` walks them. */
const MAPS = ['properties', '$defs', 'definitions'] as const;
const LISTS = ['anyOf', 'oneOf'] as const;
const ONES = ['items', 'additionalProperties'] as const;

/** An integer schema's inclusive bounds (`undefined`: unbounded on that side), or `undefined` when it has none. */
function boundsOf(node: Record<string, unknown>): { lo: number | undefined; hi: number | undefined } | undefined {
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum } = node;
  if ([minimum, maximum, exclusiveMinimum, exclusiveMaximum].every((bound) => bound === undefined)) return undefined;
  const los = [
    typeof minimum === 'number' ? Math.ceil(minimum) : undefined,
    typeof exclusiveMinimum === 'number' ? Math.floor(exclusiveMinimum) + 1 : undefined,
  ].filter((bound): bound is number => bound !== undefined);
  const his = [
    typeof maximum === 'number' ? Math.floor(maximum) : undefined,
    typeof exclusiveMaximum === 'number' ? Math.ceil(exclusiveMaximum) - 1 : undefined,
  ].filter((bound): bound is number => bound !== undefined);
  return {
    lo: los.length === 0 ? undefined : Math.max(...los),
    hi: his.length === 0 ? undefined : Math.min(...his),
  };
}

function isInteger(node: Record<string, unknown>): boolean {
  return node.type === 'integer';
}

/**
 * The problem with an integer schema's bounds, or `undefined` when they can be enforced exactly: both bounds with at
 * most {@link MAX_INTEGER_RANGE} values between them, or `minimum: 0` alone.
 */
export function integerBoundsProblem(node: Record<string, unknown>, path: string): string | undefined {
  const bounds = boundsOf(node);
  if (bounds === undefined) return undefined;
  if (!isInteger(node)) {
    return node.type === 'number' || node.type === undefined
      ? undefined
      : `numeric bounds (at \`${path || '/'}\`) need \`"type": "integer"\` or \`"type": "number"\``;
  }
  const { lo, hi } = bounds;
  if (lo === 0 && hi === undefined && node.exclusiveMinimum === undefined) return undefined;
  if (lo !== undefined && hi !== undefined) {
    if (hi < lo) return `the integer range at \`${path || '/'}\` is empty`;
    if (hi - lo + 1 <= MAX_INTEGER_RANGE) return undefined;
  }
  return (
    `integer bounds (at \`${path || '/'}\`) are supported as a range of at most ${MAX_INTEGER_RANGE} values ` +
    '(both `minimum` and `maximum`) or as `minimum: 0` alone'
  );
}

/**
 * A copy of `schema` with every bounded integer written as the `enum` of its values, and every length-bounded string
 * as a pattern (see the file's comment).
 */
export function enumerateIntegerRanges(schema: unknown): unknown {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return schema;
  const node = { ...(schema as Record<string, unknown>) };
  const bounds = isInteger(node) ? boundsOf(node) : undefined;
  if (bounds?.lo !== undefined && bounds.hi !== undefined) {
    const values = Array.from({ length: bounds.hi - bounds.lo + 1 }, (_, index) => (bounds.lo as number) + index);
    for (const key of ['type', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']) delete node[key];
    node.enum = Array.isArray(node.enum) ? node.enum.filter((value) => values.includes(value as number)) : values;
  }
  const { minLength, maxLength } = node;
  if (node.type === 'string' && node.pattern === undefined && (minLength !== undefined || maxLength !== undefined)) {
    const least = typeof minLength === 'number' ? Math.max(0, Math.ceil(minLength)) : 0;
    const most = typeof maxLength === 'number' ? String(Math.floor(maxLength)) : '';
    node.pattern = `^[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]{${least},${most}}$`;
    delete node.minLength;
    delete node.maxLength;
  }
  for (const key of MAPS) {
    const map = node[key];
    if (typeof map === 'object' && map !== null && !Array.isArray(map)) {
      node[key] = Object.fromEntries(Object.entries(map).map(([name, child]) => [name, enumerateIntegerRanges(child)]));
    }
  }
  for (const key of LISTS) {
    const list = node[key];
    if (Array.isArray(list)) node[key] = list.map(enumerateIntegerRanges);
  }
  for (const key of ONES) if (node[key] !== undefined) node[key] = enumerateIntegerRanges(node[key]);
  return node;
}
