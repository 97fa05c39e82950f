// Which JSON Schema keywords a structured output may use. XGrammar enforces the keywords listed here and silently
// ignores others (`multipleOf`, `uniqueItems`, `allOf`, `not`, `if`/`then`/`else`, ...): a schema with one of those
// would be accepted and then not enforced, so it is refused, naming the keyword and where it is. Measured against
// 0.1.27 and left out too: `prefixItems` (refuses valid arrays), `minProperties` / `maxProperties` (abort the
// instance), `format` (not enforced alike for every format).
import { integerBoundsProblem } from './integer-ranges.js';

/**
 * The JSON Schema keywords a structured output's schema may use: those the grammar enforces, and annotations that
 * constrain nothing (`title`, `description`, ...).
 *
 * @example
 * ```ts
 * SUPPORTED_SCHEMA_KEYWORDS.has('minItems'); // true
 * ```
 */
export const SUPPORTED_SCHEMA_KEYWORDS: ReadonlySet<string> = new Set([
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'minItems',
  'maxItems',
  'enum',
  'const',
  'anyOf',
  'oneOf',
  '$ref',
  '$defs',
  'definitions',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  // Annotations: they change no valid value.
  'title',
  'description',
  'default',
  'examples',
  '$schema',
  '$id',
  '$comment',
  'deprecated',
  'readOnly',
  'writeOnly',
]);

/** The bounds of a schema's size: what one request may make the worker compile. */
export interface SchemaBounds {
  /** The deepest nesting of subschemas. */
  readonly maxDepth: number;
  /** The most subschemas in all. */
  readonly maxNodes: number;
}

/** Keywords whose value is a map of subschemas. */
const SCHEMA_MAPS = ['properties', '$defs', 'definitions'] as const;
/** Keywords whose value is a list of subschemas. */
const SCHEMA_LISTS = ['anyOf', 'oneOf'] as const;
/** Keywords whose value is one subschema (or, for these, a boolean). */
const SCHEMA_ONES = ['items', 'additionalProperties'] as const;

/**
 * Checks a JSON Schema against {@link SUPPORTED_SCHEMA_KEYWORDS} and `bounds`; returns the first problem as a
 * message (naming the keyword and its JSON pointer), or `undefined` when the schema may be compiled.
 */
export function schemaProblem(schema: unknown, bounds: SchemaBounds): string | undefined {
  let nodes = 0;
  const visit = (node: unknown, path: string, depth: number): string | undefined => {
    if (typeof node === 'boolean') return undefined;
    if (typeof node !== 'object' || node === null || Array.isArray(node)) {
      return `the schema at \`${path || '/'}\` must be an object or a boolean`;
    }
    nodes += 1;
    if (nodes > bounds.maxNodes) return `the schema has more than ${bounds.maxNodes} subschemas`;
    if (depth > bounds.maxDepth) return `the schema nests deeper than ${bounds.maxDepth} levels (at \`${path}\`)`;
    const record = node as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      if (!SUPPORTED_SCHEMA_KEYWORDS.has(key)) {
        return `the schema keyword \`${key.slice(0, 64)}\` (at \`${path || '/'}\`) is not supported by structured outputs`;
      }
    }
    for (const key of SCHEMA_MAPS) {
      const map = record[key];
      if (map === undefined) continue;
      if (typeof map !== 'object' || map === null || Array.isArray(map)) {
        return `\`${key}\` (at \`${path || '/'}\`) must be an object`;
      }
      for (const [name, child] of Object.entries(map)) {
        const problem = visit(child, `${path}/${key}/${name.slice(0, 64)}`, depth + 1);
        if (problem !== undefined) return problem;
      }
    }
    for (const key of SCHEMA_LISTS) {
      const list = record[key];
      if (list === undefined) continue;
      if (!Array.isArray(list) || list.length === 0) {
        return `\`${key}\` (at \`${path || '/'}\`) must be a non-empty array`;
      }
      for (const [index, child] of list.entries()) {
        const problem = visit(child, `${path}/${key}/${index}`, depth + 1);
        if (problem !== undefined) return problem;
      }
    }
    for (const key of SCHEMA_ONES) {
      if (record[key] === undefined) continue;
      const problem = visit(record[key], `${path}/${key}`, depth + 1);
      if (problem !== undefined) return problem;
    }
    const range = integerBoundsProblem(record, path);
    if (range !== undefined) return range;
    if (record.pattern !== undefined) {
      if (typeof record.pattern !== 'string') return `\`pattern\` (at \`${path || '/'}\`) must be a string`;
      try {
        new RegExp(record.pattern, 'u');
      } catch {
        return `\`pattern\` (at \`${path || '/'}\`) is not a valid regular expression`;
      }
    }
    return undefined;
  };
  return visit(schema, '', 0);
}
