// The tokenizer threads against transformers.js's own tokenizer on the real MiniLM WordPiece tokenizer: the same ids
// and segment ids for texts and pairs, in order; the request's token bound stops the thread where it is passed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer } from '../src/requests/tokenizer.js';
import { type TokenizerThreads, createTokenizerThreads } from '../src/requests/tokenizer-threads.js';
import { MINILM_TOKENIZER_DIR } from './helpers/bert-encoder.js';

const TEXTS = ['How do batchers pad their inputs?', 'Hello', 'Ünïcödé — “quotes”, emoji 🎉 and CJK 漢字', 'a b c'];
const PAIRS = ['Paris is in France.', 'x', 'Batching pads every input of a call to the longest one.', 'd'];

describe('createTokenizerThreads', () => {
  let threads: TokenizerThreads;
  beforeAll(async () => {
    threads = createTokenizerThreads(MINILM_TOKENIZER_DIR, { threads: 2 });
    await threads.ready;
  }, 60_000);
  afterAll(() => threads?.close());

  it("gives transformers.js's ids for texts and for pairs, in order, on every thread", async () => {
    const reference = await loadTokenizer(MINILM_TOKENIZER_DIR);
    expect(threads.isReady()).toBe(true);
    // Two requests at once: one per thread.
    const [texts, pairs] = await Promise.all([threads.encodeAll(TEXTS), threads.encodeAll(TEXTS, { pairs: PAIRS })]);
    expect(texts.stoppedAt).toBeUndefined();
    expect(texts.encodings.map((encoding) => encoding.ids)).toEqual(TEXTS.map((text) => reference.encode(text)));
    expect(texts.encodings.every((encoding) => encoding.typeIds.every((type) => type === 0))).toBe(true);
    expect(pairs.encodings).toEqual(TEXTS.map((text, index) => reference.encodePair(text, PAIRS[index] as string)));
    expect(pairs.encodings[0]?.typeIds).toContain(1);
  });

  it('stops at the first text that takes the total past maxTotal', async () => {
    const all = await threads.encodeAll(TEXTS);
    const lengths = all.encodings.map((encoding) => encoding.ids.length);
    const maxTotal = (lengths[0] as number) + (lengths[1] as number);
    const cut = await threads.encodeAll(TEXTS, { maxTotal });
    expect(cut.stoppedAt).toBe(2);
    expect(cut.encodings).toHaveLength(3);
    expect(
      (await threads.encodeAll(TEXTS, { maxTotal: maxTotal + (lengths[2] as number) + (lengths[3] as number) }))
        .stoppedAt,
    ).toBeUndefined();
  });

  it('refuses work once closed', async () => {
    const closing = createTokenizerThreads(MINILM_TOKENIZER_DIR);
    await closing.ready;
    await closing.close();
    await expect(closing.encodeAll(['hi'])).rejects.toThrow(/closed/);
  });

  it('rejects ready, naming the folder, when the tokenizer cannot load', async () => {
    const broken = createTokenizerThreads('/nonexistent/model');
    await expect(broken.ready).rejects.toThrow(/nonexistent\/model/);
    // Later requests are refused at once, not posted to a thread that is gone.
    expect(broken.isReady()).toBe(false);
    await expect(broken.encodeAll(['hi'])).rejects.toThrow(/nonexistent\/model/);
    await broken.close();
  });
});
