import { describe, expect, it } from 'vitest';
import { GenerationRow, firstStop } from '../src/runners/generation-row.js';
import type { GenerationRowOptions } from '../src/runners/generation-row.js';

// A fake tokenizer: each id is a fixed piece of text; ids 100+ are the two halves of a 4-byte emoji, which
// decodes to U+FFFD until both halves are present (as a byte-fallback tokenizer does).
const PIECES: Record<number, string> = {
  1: 'Once ',
  2: 'upon ',
  3: 'a ',
  4: 'time',
  5: '<|',
  6: 'end',
  7: '_story',
  8: '|>',
  9: 'x',
};
function decode(ids: readonly number[]): string {
  let text = '';
  for (let i = 0; i < ids.length; i += 1) {
    const id = ids[i] as number;
    if (id === 100) text += ids[i + 1] === 101 ? '🙂' : '\ufffd';
    else if (id !== 101) text += PIECES[id] ?? '';
  }
  return text;
}

function row(overrides: Partial<GenerationRowOptions> = {}): GenerationRow {
  return new GenerationRow({
    promptTokens: 3,
    maxNewTokens: 10,
    stop: ['<|end_story|>'],
    eosTokenIds: new Set([0]),
    decode,
    ...overrides,
  });
}

function drive(generation: GenerationRow, ids: readonly number[]): (string | null)[] {
  return ids.map((id) => {
    generation.push(id);
    const chunk = generation.takeChunk();
    return chunk === null ? null : chunk.text + (chunk.finish_reason === null ? '' : `|${chunk.finish_reason}`);
  });
}

describe('GenerationRow', () => {
  it('holds back text that may grow into a stop string, then drops the stop string', () => {
    const generation = row();
    expect(drive(generation, [1, 2, 5, 6, 7, 8, 9])).toEqual(['Once ', 'upon ', null, null, null, '|stop', null]);
    expect(generation.output()).toEqual({
      text: 'Once upon ',
      finish_reason: 'stop',
      usage: { prompt_tokens: 3, completion_tokens: 6, total_tokens: 9 },
    });
  });

  it('releases held-back text once it can no longer be a stop string', () => {
    const generation = row({ maxNewTokens: 3 });
    expect(drive(generation, [1, 5, 9])).toEqual(['Once ', null, '<|x|length']);
    expect(generation.output().text).toBe('Once <|x');
  });

  it('holds back an unfinished multi-byte character', () => {
    const generation = row();
    expect(drive(generation, [1, 100, 101, 0])).toEqual(['Once ', null, '🙂', '|stop']);
    expect(generation.output()).toMatchObject({
      text: 'Once 🙂',
      finish_reason: 'stop',
      usage: { completion_tokens: 4 },
    });
  });

  it('ends at its own max_new_tokens and ignores the tokens the batch generates after', () => {
    const generation = row({ maxNewTokens: 2 });
    expect(drive(generation, [1, 2, 3, 4])).toEqual(['Once ', 'upon |length', null, null]);
    expect(generation.output()).toMatchObject({
      text: 'Once upon ',
      finish_reason: 'length',
      usage: { completion_tokens: 2 },
    });
  });

  it('stops at the earliest of several stop strings', () => {
    expect(firstStop('a time upon', ['upon', 'time'])).toBe(2);
    expect(firstStop('nothing', ['upon'])).toBe(-1);
    const generation = row({ stop: ['upon', 'a '] });
    expect(drive(generation, [1, 3, 2])).toEqual(['Once ', '|stop', null]);
  });

  it('forceFinish ends an unfinished row as length without changing its text', () => {
    const generation = row();
    drive(generation, [1]);
    generation.forceFinish();
    expect(generation.takeChunk()).toEqual({
      text: '',
      finish_reason: 'length',
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    });
    expect(generation.takeChunk()).toBeNull();
  });
});

describe('GenerationRow with a piece table', () => {
  // The fake tokenizer's pieces; the emoji halves have none (as byte-fallback tokens), so rows decode a window there.
  const pieceOf = (id: number) => (id >= 100 ? undefined : (PIECES[id] ?? ''));

  it('streams the same chunks and result as decoding windows', () => {
    for (const ids of [
      [1, 2, 5, 6, 7, 8, 9],
      [1, 100, 101, 3, 4, 0],
      [1, 5, 9],
      [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4],
    ]) {
      const windows = row({ maxNewTokens: 10 });
      const pieces = row({ maxNewTokens: 10, pieceOf });
      expect(drive(pieces, ids)).toEqual(drive(windows, ids));
      expect(pieces.output()).toEqual(windows.output());
    }
  });

  it('decodes ids without a piece through the window', () => {
    const calls: number[][] = [];
    const generation = row({ pieceOf, decode: (ids) => (calls.push([...ids]), decode(ids)) });
    drive(generation, [1, 2, 100, 101, 3]);
    // The first token and the emoji halves are decoded (windows starting at the last settled token); `upon ` and
    // `a ` come from the table without a decode.
    expect(calls).toEqual([[1], [2], [2, 100], [2], [2, 100, 101]]);
    expect(generation.output().text).toBe('Once upon 🙂a ');
  });

  it('resumes from the token ids its chunks carried: the same text and ids, none sent twice', () => {
    // Chunks carry every id generated since the previous chunk, also ids whose text is held back.
    const taken = (generation: GenerationRow, ids: readonly number[]) =>
      ids.flatMap((id) => {
        generation.push(id);
        const chunk = generation.takeChunk();
        return chunk === null ? [] : [{ text: chunk.text, tokens: chunk.tokens }];
      });
    for (const ids of [
      [1, 2, 5, 6, 9, 3],
      [1, 100, 101, 2, 9],
    ]) {
      const uninterrupted = row({ tokenChunks: true });
      const whole = taken(uninterrupted, ids);
      // The worker died after its chunk `cut`: its successor knows only the ids those chunks carried.
      for (let cut = 1; cut < whole.length; cut += 1) {
        const sent = whole.slice(0, cut);
        const resumed = row({ tokenChunks: true });
        const known = sent.flatMap((chunk) => chunk.tokens ?? []);
        resumed.replay(known);
        expect(resumed.takeChunk()).toBeNull(); // nothing it had sent goes out again
        const all = [...sent, ...taken(resumed, ids.slice(known.length))];
        expect(all.map((chunk) => chunk.text).join('')).toBe(whole.map((chunk) => chunk.text).join(''));
        expect(all.flatMap((chunk) => chunk.tokens)).toEqual(ids);
        expect(resumed.output()).toEqual(uninterrupted.output());
      }
    }
    // Without `tokenChunks`, chunks carry no ids (in-process streams are unchanged).
    const plain = row();
    plain.push(1);
    expect(plain.takeChunk()).toEqual({ text: 'Once ', finish_reason: null, usage: null });
  });

  it('resumed after its final chunk went out (end of sequence, stop string, max_new_tokens): sends nothing again', () => {
    for (const [ids, maxNewTokens] of [
      [[1, 2, 3, 0], 10],
      [[1, 5, 6, 7, 8, 9], 10],
      [[1, 2, 3, 9], 4],
    ] as const) {
      const uninterrupted = row({ tokenChunks: true, maxNewTokens });
      const chunks = ids.flatMap((id) => {
        uninterrupted.push(id);
        const chunk = uninterrupted.takeChunk();
        return chunk === null ? [] : [chunk];
      });
      expect(chunks.at(-1)?.finish_reason).not.toBeNull();
      const resumed = row({ tokenChunks: true, maxNewTokens });
      resumed.replay(chunks.flatMap((chunk) => chunk.tokens ?? []));
      expect(resumed.finished).toBe(true);
      expect(resumed.takeChunk()).toBeNull();
      expect(resumed.output()).toEqual(uninterrupted.output());
    }
  });
});
