// A fake causal LM for the continuous loop's bookkeeping tests: its "KV cache" is each row's token history, checked
// at every call (each row's past holds exactly its own tokens, right-aligned, zero padding, masked as such), and the
// token it answers depends on the whole history. Any row copied to the wrong place, stale data left in a reused
// array, a wrong mask or position changes the tokens, so outputs are compared with each sequence generated alone.
import { DecodeLoop } from '../../src/runners/continuous/decode-loop.js';
import type { DecodeLoopOptions } from '../../src/runners/continuous/decode-loop.js';
import type { DecodeLoopStats } from '../../src/runners/continuous/loop-stats.js';
import { Sequence } from '../../src/runners/continuous/sequence.js';
import type { ModelGeometry } from '../../src/runners/continuous/padded-batch.js';
import { seededRandom } from '../../src/runners/continuous/sampler.js';
import { GenerationRow } from '../../src/runners/generation-row.js';

export const VOCAB = 16;
export const GEOMETRY: ModelGeometry = {
  pastNames: ['past_key_values.0.key'],
  presentNames: ['present.0.key'],
  kvHeads: 1,
  headDim: 1,
  vocabSize: VOCAB,
  padTokenId: 0,
  positionIds: true,
};

/** The next token after a history: a hash of every token, so a single wrong KV entry changes it. */
export function nextToken(history: readonly number[]): number {
  let hash = 17;
  for (const token of history) hash = (hash * 31 + token + 7) % 1_000_003;
  return hash % VOCAB;
}

interface FakeTensor {
  readonly data: Float32Array | BigInt64Array;
  readonly dims: readonly number[];
}

/**
 * A causal LM whose KV entry for a token is `token + 1` (0 is padding). It throws when a row's past is not
 * `[0 ... 0, own tokens]` with the mask and positions to match, and puts all logit mass on `nextToken(history)`.
 */
export function fakeSession(): {
  run(feeds: Record<string, FakeTensor>): Promise<Record<string, FakeTensor>>;
  calls: number;
} {
  const session = {
    calls: 0,
    async run(feeds: Record<string, FakeTensor>): Promise<Record<string, FakeTensor>> {
      session.calls += 1;
      const ids = feeds.input_ids as FakeTensor;
      const mask = (feeds.attention_mask as FakeTensor).data as BigInt64Array;
      const positions = (feeds.position_ids as FakeTensor).data as BigInt64Array;
      const pastTensor = feeds['past_key_values.0.key'] as FakeTensor;
      const [rows, length] = ids.dims as [number, number];
      const past = pastTensor.dims[2] as number;
      const width = past + length;
      const kv = pastTensor.data as Float32Array;
      const present = new Float32Array(rows * (past + length));
      const logits = new Float32Array(rows * length * VOCAB);
      for (let row = 0; row < rows; row += 1) {
        const real = Array.from({ length: past }, (_, at) => mask[row * width + at] === 1n).filter(Boolean).length;
        const history: number[] = [];
        for (let at = 0; at < past; at += 1) {
          const value = kv[row * past + at] as number;
          const masked = mask[row * width + at] === 0n;
          if (masked !== at < past - real) throw new Error(`row ${row}: mask is not left padding`);
          if (masked && value !== 0) throw new Error(`row ${row}: padding at ${at} holds ${value}`);
          if (!masked && value === 0) throw new Error(`row ${row}: real position ${at} is empty`);
          if (!masked) history.push(value - 1);
          present[row * (past + length) + at] = value;
        }
        let seen = 0;
        for (let at = 0; at < length; at += 1) {
          const id = Number((ids.data as BigInt64Array)[row * length + at]);
          const masked = mask[row * width + past + at] === 0n;
          if (masked) continue;
          if (Number(positions[row * length + at]) !== real + seen)
            throw new Error(`row ${row}: position ${positions[row * length + at]}`);
          seen += 1;
          history.push(id);
          present[row * (past + length) + past + at] = id + 1;
          logits[(row * length + at) * VOCAB + nextToken(history)] = 1;
        }
      }
      return {
        logits: { data: logits, dims: [rows, length, VOCAB] },
        'present.0.key': { data: present, dims: [rows, 1, past + length, 1] },
      };
    },
  };
  return session;
}

/** What `prompt` generates alone: `max` tokens, or fewer when token 15 (EOS here) comes first. */
export function alone(prompt: readonly number[], max: number): number[] {
  const history = [...prompt];
  const out: number[] = [];
  while (out.length < max) {
    const token = nextToken(history);
    out.push(token);
    history.push(token);
    if (token === 15) break;
  }
  return out;
}

/** The `max_new_tokens` each test sequence was made with. */
const maxima = new WeakMap<Sequence, number>();
export const maxOf = (each: Sequence): number => maxima.get(each) ?? 0;

export function sequence(prompt: readonly number[], max: number): Sequence {
  const output = new GenerationRow({
    promptTokens: prompt.length,
    maxNewTokens: max,
    stop: [],
    eosTokenIds: new Set([15]),
    decode: (ids) => ids.join(','),
  });
  const made = new Sequence(prompt, output, { temperature: 0, topP: 1, random: seededRandom(1) }, () => false);
  maxima.set(made, max);
  return made;
}

export const idsOf = (sequence: Sequence): number[] => {
  const text = sequence.output.output().text;
  return text === '' ? [] : text.split(',').map(Number);
};

/**
 * Runs `plan` (sequences added after given iterations, or as soon as everything added before is done) through a
 * loop; resolves when all are done.
 */
export async function runLoop(
  plan: readonly { readonly at: number; readonly sequence: Sequence }[],
  options: DecodeLoopOptions,
  onIteration: (stats: DecodeLoopStats, loop: DecodeLoop) => void = () => undefined,
): Promise<DecodeLoopStats> {
  const session = fakeSession();
  let iteration = 0;
  const pending = [...plan].sort((a, b) => a.at - b.at);
  const added: Sequence[] = [];
  let resolveDone: () => void = () => undefined;
  let rejectDone: (error: unknown) => void = () => undefined;
  const done = new Promise<void>((resolve, reject) => {
    resolveDone = resolve;
    rejectDone = reject;
  });
  const loop: DecodeLoop = new DecodeLoop(session as never, GEOMETRY, options, {
    afterIteration() {
      iteration += 1;
      onIteration(loop.stats, loop);
      const idle = added.every((each) => each.done);
      const due: Sequence[] = [];
      while (pending.length > 0 && ((pending[0]?.at as number) <= iteration || (idle && due.length === 0))) {
        due.push((pending.shift() as { sequence: Sequence }).sequence);
      }
      added.push(...due);
      if (due.length > 0) loop.add(due);
      else if (pending.length === 0 && idle) resolveDone();
    },
    // The fake session's checks throw: the loop reports them here.
    failed: rejectDone,
    activity: () => undefined,
  });
  const later = pending.findIndex((entry) => entry.at > 0);
  const first = pending.splice(0, later < 0 ? pending.length : later).map((entry) => entry.sequence);
  added.push(...first);
  loop.add(first);
  await done;
  return loop.stats;
}

/** A deterministic prompt of `length` tokens (never 15, the fake EOS). */
export const prompt = (length: number, seed: number): number[] =>
  Array.from({ length }, (_, index) => (seed * 7 + index * 3) % 15);
