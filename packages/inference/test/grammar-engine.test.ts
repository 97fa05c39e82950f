// The grammar engine against real vocabularies: GPT-2's byte-level BPE (50,257 tokens) and the bundled tinystories
// model's (2,048 SentencePiece-style tokens, no `{`). Generations here are random walks through the masks: any
// allowed token, so what completes must be valid whatever a model would prefer.
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '../src/contract/errors.js';
import type { GrammarSpec } from '../src/contract/text-generation-types.js';
import { GrammarEngine, applyTokenMask } from '../src/grammar/grammar-engine.js';
import { checkGrammarSpec } from '../src/grammar/grammar-spec.js';
import { readVocabulary } from '../src/grammar/vocabulary.js';
import { TINYSTORIES_DIR } from './helpers/paths.js';

const GPT2_DIR = fileURLToPath(new URL('../../../models/gpt2-tokenizer', import.meta.url));
const EOS = 50256;

let engine: GrammarEngine;
let tokens: readonly string[];

/** GPT-2's byte-level token strings back to text. */
function byteDecoder(): (ids: readonly number[]) => string {
  const bytes: number[] = [];
  for (let b = 33; b <= 126; b += 1) bytes.push(b);
  for (let b = 161; b <= 172; b += 1) bytes.push(b);
  for (let b = 174; b <= 255; b += 1) bytes.push(b);
  const chars = bytes.map((b) => String.fromCodePoint(b));
  let extra = 0;
  for (let b = 0; b < 256; b += 1) {
    if (!bytes.includes(b)) {
      bytes.push(b);
      chars.push(String.fromCodePoint(256 + extra));
      extra += 1;
    }
  }
  const byteOf = new Map(chars.map((char, index) => [char, bytes[index] as number]));
  return (ids) =>
    Buffer.from(ids.flatMap((id) => Array.from(tokens[id] as string, (char) => byteOf.get(char) as number))).toString(
      'utf8',
    );
}

/** A random walk through the grammar: at each step one allowed token, until the stop token or `max` steps. */
async function walk(spec: GrammarSpec, seed: number, max = 400): Promise<{ text: string; terminated: boolean }> {
  const matcher = await engine.matcher(spec);
  const mask = new Int32Array(Math.ceil(50257 / 32));
  const logits = new Float32Array(50257);
  const decode = byteDecoder();
  const ids: number[] = [];
  let state = seed;
  try {
    for (let step = 0; step < max && !matcher.isTerminated(); step += 1) {
      matcher.fillNextTokenBitmask(mask);
      logits.fill(0);
      const allowed = applyTokenMask(logits, mask);
      expect(allowed).toBeGreaterThan(0);
      const choices: number[] = [];
      logits.forEach((value, id) => {
        if (value === 0) choices.push(id);
      });
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      // Prefer the stop token once allowed, after a few steps, so walks end.
      const token = choices.includes(EOS) && step > 20 ? EOS : (choices[state % choices.length] as number);
      expect(matcher.acceptToken(token)).toBe(true);
      if (token !== EOS) ids.push(token);
    }
    return { text: decode(ids), terminated: matcher.isTerminated() };
  } finally {
    matcher.dispose();
  }
}

beforeAll(async () => {
  const vocabulary = readVocabulary(GPT2_DIR);
  tokens = vocabulary.tokens;
  engine = await GrammarEngine.create({ vocabulary, vocabSize: 50257, stopTokenIds: [EOS], cacheSize: 4 });
}, 60_000);

describe('GrammarEngine on the GPT-2 vocabulary', () => {
  it('reads the byte-level vocabulary', () => {
    expect(readVocabulary(GPT2_DIR)).toMatchObject({ type: 'byte_level', prependSpace: false });
    expect(tokens).toHaveLength(50257);
  });

  it('constrains a random walk to a JSON schema', async () => {
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 8 },
        age: { type: 'integer', minimum: 0, maximum: 120 },
        tags: { type: 'array', items: { type: 'string', enum: ['a', 'b'] }, minItems: 1, maxItems: 3 },
      },
      required: ['name', 'age', 'tags'],
      additionalProperties: false,
    };
    const validate = new Ajv().compile(schema);
    for (let seed = 1; seed <= 3; seed += 1) {
      const { text, terminated } = await walk({ type: 'json', schema }, seed);
      expect(terminated).toBe(true);
      const value: unknown = JSON.parse(text);
      expect(validate(value), `${text}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });

  it('enforces integer ranges exactly (XGrammar alone lets 121-129 through `maximum: 120`)', async () => {
    const seen = new Set<number>();
    for (let seed = 1; seed <= 40; seed += 1) {
      const { text } = await walk({ type: 'json', schema: { type: 'integer', minimum: 0, maximum: 120 } }, seed, 10);
      seen.add(Number(text));
    }
    for (const value of seen) expect([value, value >= 0 && value <= 120]).toEqual([value, true]);
    expect(seen.size).toBeGreaterThan(5);
  });

  it('keeps raw control characters out of length-bounded strings (XGrammar alone lets them through)', async () => {
    for (let seed = 1; seed <= 30; seed += 1) {
      const { text } = await walk({ type: 'json', schema: { type: 'string', minLength: 2, maxLength: 6 } }, seed, 12);
      const points = Array.from(JSON.parse(text) as string, (char) => char.codePointAt(0) as number);
      expect(points.length).toBeGreaterThanOrEqual(2);
      expect(points.length).toBeLessThanOrEqual(6);
      expect(points.filter((point) => point < 0x20)).toEqual([]);
    }
  });

  it('constrains to a regex and to a choice list', async () => {
    const regex = await walk({ type: 'regex', pattern: '[0-9]{3}-[a-z]{2}' }, 7);
    expect(regex.text).toMatch(/^[0-9]{3}-[a-z]{2}$/);
    const choice = await walk({ type: 'choice', choices: ['red', 'green', 'blue'] }, 3);
    expect(['red', 'green', 'blue']).toContain(choice.text);
    const json = await walk({ type: 'json' }, 11, 60);
    expect(json.text.startsWith('{')).toBe(true);
  });

  it('throws a WASM instance away after a failure inside it, and answers the next request on a new one', async () => {
    const recycled = engine.stats.recycled;
    await expect(engine.matcher({ type: 'json', schema: { type: 'no-such-type' } })).rejects.toThrow(
      'could not be compiled',
    );
    expect(engine.stats.recycled).toBe(recycled + 1);
    const { text } = await walk({ type: 'choice', choices: ['after'] }, 1);
    expect(text).toBe('after');
  });

  it('compiles a new grammar once when requests for it arrive together', async () => {
    const before = { ...engine.stats };
    const spec: GrammarSpec = { type: 'choice', choices: ['together'] };
    const matchers = await Promise.all([engine.matcher(spec), engine.matcher(spec), engine.matcher(spec)]);
    expect(engine.stats.compiles).toBe(before.compiles + 1);
    expect(engine.stats.cacheHits).toBe(before.cacheHits + 2);
    for (const matcher of matchers) matcher.dispose();
  });

  it('caches compiled grammars (LRU bounded by cacheSize)', async () => {
    const spec: GrammarSpec = { type: 'choice', choices: ['cache-me'] };
    (await engine.matcher(spec)).dispose();
    const before = { ...engine.stats };
    (await engine.matcher(spec)).dispose();
    expect(engine.stats.cacheHits).toBe(before.cacheHits + 1);
    expect(engine.stats.compiles).toBe(before.compiles);
    for (let index = 0; index < 5; index += 1)
      (await engine.matcher({ type: 'choice', choices: [`x${index}`] })).dispose();
    (await engine.matcher(spec)).dispose();
    expect(engine.stats.compiles).toBe(before.compiles + 6);
  });
});

describe('grammar checks', () => {
  const invalid = (field: string, message: string) => new InputError(field, message);

  it('refuses unsupported keywords, naming them', () => {
    for (const keyword of ['multipleOf', 'uniqueItems', 'allOf', 'not', 'if']) {
      expect(() =>
        checkGrammarSpec(
          { type: 'json', schema: { type: 'object', properties: { a: { type: 'integer', [keyword]: 2 } } } },
          invalid,
        ),
      ).toThrow(`\`${keyword}\` (at \`/properties/a\`)`);
    }
  });

  it('refuses integer bounds it cannot enforce exactly, and the keywords XGrammar mishandles', () => {
    const integer = (bounds: Record<string, number>) => ({ type: 'json', schema: { type: 'integer', ...bounds } });
    expect(() => checkGrammarSpec(integer({ minimum: 7 }), invalid)).toThrow('integer bounds (at `/`)');
    expect(() => checkGrammarSpec(integer({ minimum: 0, maximum: 5000 }), invalid)).toThrow('at most 1024 values');
    expect(checkGrammarSpec(integer({ minimum: 0 }), invalid)).toEqual(integer({ minimum: 0 }));
    expect(checkGrammarSpec(integer({ minimum: -5, maximum: 5 }), invalid)).toEqual(
      integer({ minimum: -5, maximum: 5 }),
    );
    for (const keyword of ['prefixItems', 'minProperties', 'format']) {
      expect(() => checkGrammarSpec({ type: 'json', schema: { [keyword]: 1 } }, invalid)).toThrow(`\`${keyword}\``);
    }
  });

  it('refuses oversized and deeply nested schemas, and invalid regexes', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let level = 0; level < 20; level += 1) deep = { type: 'array', items: deep };
    expect(() => checkGrammarSpec({ type: 'json', schema: deep }, invalid)).toThrow('nests deeper than 16');
    const wide = { type: 'object', description: 'x'.repeat(40_000) };
    expect(() => checkGrammarSpec({ type: 'json', schema: wide }, invalid)).toThrow('more than 32768');
    expect(() => checkGrammarSpec({ type: 'regex', pattern: '([a-z]' }, invalid)).toThrow('invalid regex');
    expect(() => checkGrammarSpec({ type: 'regex', pattern: '(a)\\1' }, invalid)).toThrow('cannot be enforced');
  });

  it('refuses a grammar the vocabulary cannot spell, and keeps working after', async () => {
    const tiny = await GrammarEngine.create({
      vocabulary: readVocabulary(TINYSTORIES_DIR),
      vocabSize: 2048,
      stopTokenIds: [2],
    });
    await expect(tiny.matcher({ type: 'json' })).rejects.toThrow('cannot spell this grammar');
    await expect(tiny.matcher({ type: 'choice', choices: ['{"a": 1}'] })).rejects.toThrow(InputError);
    const ok = await tiny.matcher({ type: 'choice', choices: ['once'] });
    expect(ok.isTerminated()).toBe(false);
    ok.dispose();
  });
});
