// Log-probabilities read from the decode loop's own logits: the log-softmax of the model's raw logits (before
// temperature and top-p, as vLLM reports them), for the sampled token and the `top` most likely ones.
import type { RawLogprob } from '../generation-row.js';

/**
 * The log-probability of `token` under `logits` and the `top` most likely tokens (ties: the lower id first). One
 * pass for the normaliser and one for the top list (kept sorted by insertion: `top` is at most 20).
 */
export function tokenLogprobs(logits: Float32Array, token: number, top: number): RawLogprob {
  const size = logits.length;
  let max = Number.NEGATIVE_INFINITY;
  for (let index = 0; index < size; index += 1) if ((logits[index] as number) > max) max = logits[index] as number;
  let sum = 0;
  for (let index = 0; index < size; index += 1) sum += Math.exp((logits[index] as number) - max);
  const norm = max + Math.log(sum);
  const ids: number[] = [];
  for (let index = 0; index < size && top > 0; index += 1) {
    const value = logits[index] as number;
    if (ids.length === top && value <= (logits[ids[top - 1] as number] as number)) continue;
    let at = ids.length;
    while (at > 0 && value > (logits[ids[at - 1] as number] as number)) at -= 1;
    ids.splice(at, 0, index);
    if (ids.length > top) ids.pop();
  }
  return {
    logprob: (logits[token] as number) - norm,
    top: ids.map((id) => [id, (logits[id] as number) - norm] as const),
  };
}
