// How a text the fleet sent differs from the one right (greedy) text: the pure check behind every 200 and every
// stream, kept apart from the processes so it is tested on its own (text-check.test.ts).

/** How a received text compares with the expected one. */
export type TextVerdict = 'exact' | 'repeated' | 'skipped' | 'mismatched';

/**
 * Compares what a client received with the expected greedy text, byte for byte. `complete`: the answer ended
 * normally (a 200 body, or a stream's `[DONE]`), so it must be the whole text; otherwise (a stream cut by an error
 * event) it must be a prefix of it. A difference is `repeated` when the received text goes back to an earlier point of
 * the expected text and sends it again (a doubled stream, a replay), `skipped` when it jumps over part of it (or a
 * complete answer stops short), `mismatched` otherwise.
 *
 * @example
 * ```ts
 * compareText('Once upon a time', 'Once upon a time', true); // 'exact'
 * compareText('Once upon a time', 'Once upon upon a time', true); // 'repeated'
 * compareText('Once upon a time', 'Once upon', false); // 'exact' (a prefix, cut by an error event)
 * ```
 */
export function compareText(expected: string, received: string, complete: boolean): TextVerdict {
  if (typeof expected !== 'string' || typeof received !== 'string') {
    throw new TypeError(`Expected two strings, got ${typeof expected} and ${typeof received}`);
  }
  if (received === expected) return 'exact';
  const same = commonPrefixLength(expected, received);
  if (same === received.length) {
    // Everything received is right: a cut stream is fine, a complete answer lacks its end.
    return complete ? 'skipped' : 'exact';
  }
  // The received text leaves the expected one after `same` characters; where does the rest come from?
  const rest = received.slice(same);
  if (complete) {
    // A complete answer's rest must be the expected text's end: it resumed from one point, before or after.
    const from = expected.length - rest.length;
    if (from >= 0 && expected.endsWith(rest)) return from < same ? 'repeated' : 'skipped';
    return 'mismatched';
  }
  // A cut stream's rest must be found somewhere in the expected text: earlier (sent again) or later (a gap).
  if (startsAnywhereBefore(expected, rest, same)) return 'repeated';
  if (expected.indexOf(rest, same + 1) > same) return 'skipped';
  return 'mismatched';
}

function commonPrefixLength(a: string, b: string): number {
  const limit = Math.min(a.length, b.length);
  let index = 0;
  while (index < limit && a.charCodeAt(index) === b.charCodeAt(index)) index += 1;
  return index;
}

/** Whether `text` is found in `expected` at a position before `limit` (it may run past `limit`). */
function startsAnywhereBefore(expected: string, text: string, limit: number): boolean {
  for (let from = 0; from < limit; from += 1) if (expected.startsWith(text, from)) return true;
  return false;
}
