// Logits to scores, as transformers.js's `text-classification` pipeline and sentence-transformers' CrossEncoder
// compute them: softmax over the labels, or a sigmoid per label (multi-label models and one-logit cross-encoders).

/**
 * How a classifier's logits become probabilities: `softmax` over the labels (single-label classification, the
 * default) or `sigmoid` per label (`problem_type: 'multi_label_classification'`, or a model with one label).
 *
 * @example
 * ```ts
 * const activation: LabelActivation = 'softmax';
 * ```
 */
export type LabelActivation = 'softmax' | 'sigmoid';

/**
 * The activation a model's `config.json` asks for (as transformers.js reads `problem_type`), a one-label model
 * taking the sigmoid (softmax over one label is always 1).
 *
 * @example
 * ```ts
 * labelActivation({ problem_type: 'multi_label_classification' }, 3); // 'sigmoid'
 * ```
 */
export function labelActivation(config: { readonly problem_type?: unknown }, labels: number): LabelActivation {
  return config.problem_type === 'multi_label_classification' || labels === 1 ? 'sigmoid' : 'softmax';
}

/** The logistic function, without overflow for large negative inputs. */
export function sigmoid(value: number): number {
  return value >= 0 ? 1 / (1 + Math.exp(-value)) : Math.exp(value) / (1 + Math.exp(value));
}

/**
 * One item's logits as probabilities (a new array; the largest logit subtracted first, so softmax never overflows).
 *
 * @example
 * ```ts
 * labelProbabilities(Float32Array.of(0, 0), 'softmax'); // Float32Array [0.5, 0.5]
 * ```
 */
export function labelProbabilities(logits: ArrayLike<number>, activation: LabelActivation): Float32Array {
  const out = new Float32Array(logits.length);
  if (activation === 'sigmoid') {
    for (let i = 0; i < logits.length; i += 1) out[i] = sigmoid(logits[i] as number);
    return out;
  }
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < logits.length; i += 1) max = Math.max(max, logits[i] as number);
  let sum = 0;
  const exps = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; i += 1) {
    exps[i] = Math.exp((logits[i] as number) - max);
    sum += exps[i] as number;
  }
  for (let i = 0; i < logits.length; i += 1) out[i] = (exps[i] as number) / sum;
  return out;
}
