// Fast incremental detokenizing: the text one token adds after others, looked up instead of decoded. Most
// tokenizers decode a token to the same piece wherever it stands after the first one (a `▁word` is ` word`), so
// the piece is decode([anchor, id]) minus decode([anchor]), computed once per id. Tokens whose piece is not plain
// (byte fallback halves show U+FFFD) get none, and rows fall back to decoding a short window. A tokenizer for
// which pieces do not add up (checked once on random sequences) gets no table at all.

/** The piece each token adds after at least one other token, or `undefined` where it must be decoded. */
export type PieceOf = (id: number) => string | undefined;

/** A small deterministic generator for the check. */
function lcg(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 4294967296;
  };
}

/**
 * Builds the lazy piece table for `decode`, or returns `undefined` when pieces do not reproduce `decode` on
 * random sequences of `vocabSize` ids.
 */
export function tokenPieces(
  decode: (ids: readonly number[]) => string,
  vocabSize: number,
  anchor: number,
): PieceOf | undefined {
  const base = decode([anchor]);
  const cache = new Map<number, string | null>();
  const pieceOf: PieceOf = (id) => {
    let piece = cache.get(id);
    if (piece === undefined) {
      const text = decode([anchor, id]);
      piece = text.startsWith(base) && !text.includes('\ufffd') ? text.slice(base.length) : null;
      cache.set(id, piece);
    }
    return piece ?? undefined;
  };
  const next = lcg(vocabSize);
  for (let trial = 0; trial < 64; trial += 1) {
    const ids = Array.from({ length: 2 + Math.floor(next() * 12) }, () => Math.floor(next() * vocabSize));
    const pieces = ids.slice(1).map(pieceOf);
    if (pieces.some((piece) => piece === undefined)) continue;
    if (decode(ids) !== decode(ids.slice(0, 1)) + pieces.join('')) return undefined;
  }
  return pieceOf;
}
