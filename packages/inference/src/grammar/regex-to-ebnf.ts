// Regular expressions and choice lists as XGrammar EBNF: the WebAssembly build has no regex entry point, so a
// `regex` grammar is translated here, for the subset a grammar can enforce. What it cannot (back-references,
// look-arounds, lazy quantifiers, word boundaries) throws a `SyntaxError` naming the construct, never a looser
// grammar.

/** The longest repetition count `{n,m}` accepted: each bound unrolls into the grammar. */
const MAX_REPEAT = 256;

/** A character as an EBNF escape (inside a string or a class). */
function escapeChar(char: string): string {
  const code = char.codePointAt(0) as number;
  if (/[A-Za-z0-9 _]/.test(char)) return char;
  if (code < 0x80) return `\\x${code.toString(16).padStart(2, '0')}`;
  return code <= 0xffff ? `\\u${code.toString(16).padStart(4, '0')}` : `\\U${code.toString(16).padStart(8, '0')}`;
}

/** A literal string as an EBNF string. */
export function ebnfString(text: string): string {
  return `"${Array.from(text, escapeChar).join('')}"`;
}

/**
 * A choice list as EBNF: exactly one of `choices`.
 *
 * @example
 * ```ts
 * choiceToEbnf(['yes', 'no']); // 'root ::= "yes" | "no"'
 * ```
 */
export function choiceToEbnf(choices: readonly string[]): string {
  return `root ::= ${choices.map(ebnfString).join(' | ')}`;
}

const CLASS_ESCAPES: Readonly<Record<string, string>> = {
  d: '0-9',
  w: 'A-Za-z0-9_',
  s: ' \\t\\n\\r\\x0b\\x0c',
};

/**
 * Translates a regular expression (JavaScript syntax, matched against the whole text) to an EBNF grammar with
 * root rule `root`. Throws `SyntaxError` naming what it cannot translate.
 *
 * @example
 * ```ts
 * regexToEbnf('[0-9]{3}-[0-9]{4}'); // 'root ::= [0-9]{3,3} "-" [0-9]{4,4}'
 * ```
 */
export function regexToEbnf(pattern: string): string {
  new RegExp(pattern, 'u'); // A pattern JavaScript refuses is refused with its own message first.
  let at = 0;
  const chars = Array.from(pattern); // Code points: a class or literal never splits a surrogate pair.
  const peek = () => chars[at];
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} (at position ${at}) cannot be enforced by a grammar`);
  };

  const classItem = (inClass: boolean): string => {
    const char = chars[at++] as string;
    if (char !== '\\') return escapeChar(char);
    const next = chars[at++];
    if (next === undefined) return fail('a trailing backslash');
    const shorthand = CLASS_ESCAPES[next];
    if (shorthand !== undefined) return shorthand;
    if (/[DWS]/.test(next)) return inClass ? fail(`\`\\${next}\` inside a character class`) : `\\${next}`;
    if (next === 'n') return '\\n';
    if (next === 't') return '\\t';
    if (next === 'r') return '\\r';
    if (/[bB1-9kpPux0cfv]/.test(next)) return fail(`\`\\${next}\``);
    return escapeChar(next);
  };

  const atom = (): string => {
    const char = peek() as string;
    if (char === '(') {
      at += 1;
      if (peek() === '?') {
        if (chars[at + 1] !== ':') return fail('a look-around or named group');
        at += 2;
      }
      const inner = alternation();
      if (peek() !== ')') return fail('an unclosed group');
      at += 1;
      return `(${inner})`;
    }
    if (char === '[') {
      at += 1;
      let negated = false;
      if (peek() === '^') {
        negated = true;
        at += 1;
      }
      let body = '';
      while (peek() !== ']') {
        if (peek() === undefined) return fail('an unclosed character class');
        const from = classItem(true);
        if (peek() === '-' && chars[at + 1] !== ']' && chars[at + 1] !== undefined) {
          at += 1;
          body += `${from}-${classItem(true)}`;
        } else body += from;
      }
      at += 1;
      return `[${negated ? '^' : ''}${body}]`;
    }
    if (char === '.') {
      at += 1;
      return '[^\\n\\r]';
    }
    if (char === '^' || char === '$') return fail('an anchor inside the pattern');
    const item = classItem(false);
    if (item === '\\D') return '[^0-9]';
    if (item === '\\W') return '[^A-Za-z0-9_]';
    if (item === '\\S') return '[^ \\t\\n\\r\\x0b\\x0c]';
    return char === '\\' && CLASS_ESCAPES[chars[at - 1] as string] !== undefined ? `[${item}]` : `"${item}"`;
  };

  const quantified = (): string => {
    const base = atom();
    const char = peek();
    let suffix = '';
    if (char === '*' || char === '+' || char === '?') {
      at += 1;
      suffix = char;
    } else if (char === '{') {
      const match = /^\{(\d+)(,(\d*))?\}/.exec(chars.slice(at).join(''));
      if (match === null) return fail('a `{` that is not a repetition');
      at += match[0].length;
      const min = Number(match[1]);
      const max = match[2] === undefined ? min : match[3] === '' ? undefined : Number(match[3]);
      if (min > MAX_REPEAT || (max !== undefined && max > MAX_REPEAT)) {
        return fail(`a repetition over ${MAX_REPEAT}`);
      }
      suffix = max === undefined ? `{${min},}` : `{${min},${max}}`;
    }
    if (suffix !== '' && (peek() === '?' || peek() === '+')) return fail('a lazy or possessive quantifier');
    return `${base}${suffix}`;
  };

  const sequence = (): string => {
    const parts: string[] = [];
    while (peek() !== undefined && peek() !== '|' && peek() !== ')') parts.push(quantified());
    return parts.length === 0 ? '""' : parts.join(' ');
  };

  function alternation(): string {
    const branches = [sequence()];
    while (peek() === '|') {
      at += 1;
      branches.push(sequence());
    }
    return branches.join(' | ');
  }

  // The pattern matches the whole text: a leading `^` and a trailing `$` say so and are dropped.
  if (chars[0] === '^') chars.shift();
  if (chars.at(-1) === '$' && chars.at(-2) !== '\\') chars.pop();
  const root = alternation();
  if (at < chars.length) return fail('an unmatched `)`');
  return `root ::= ${root}`;
}
