// What transformers.js itself answers on a model folder, for tests and benchmarks that compare the servers with it:
// its `text-classification` pipeline (label probabilities) and a cross-encoder's pair scores (its tokenizer with
// `text_pair` and `AutoModelForSequenceClassification`, the sigmoid of the one logit, as sentence-transformers'
// CrossEncoder computes relevance). Each text or pair runs alone, so nothing is padded.
import { basename, dirname, sep } from 'node:path';
import {
  AutoModelForSequenceClassification,
  AutoTokenizer,
  type Tensor,
  env,
  pipeline,
} from '@huggingface/transformers';

function local(dir: string): string {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = dirname(dir) + sep;
  return basename(dir);
}

/** transformers.js's `text-classification` pipeline: every label's probability per text, by label name. */
export async function referenceClassify(dir: string, texts: readonly string[]): Promise<Record<string, number>[]> {
  const classifier = await pipeline('text-classification', local(dir), { dtype: 'fp32' });
  try {
    const out: Record<string, number>[] = [];
    for (const text of texts) {
      const labels = (await classifier(text, { top_k: 1000 })) as unknown as { label: string; score: number }[];
      out.push(Object.fromEntries(labels.map(({ label, score }) => [label, score])));
    }
    return out;
  } finally {
    await classifier.dispose();
  }
}

/** A cross-encoder's relevance of each `(query, document)` pair, as transformers.js computes it. */
export async function referenceScores(dir: string, query: string, documents: readonly string[]): Promise<number[]> {
  const id = local(dir);
  const tokenizer = await AutoTokenizer.from_pretrained(id);
  const model = await AutoModelForSequenceClassification.from_pretrained(id, { dtype: 'fp32' });
  try {
    const scores: number[] = [];
    for (const document of documents) {
      const inputs = tokenizer(query, { text_pair: document });
      const { logits } = (await model(inputs)) as { logits: Tensor };
      scores.push(1 / (1 + Math.exp(-(logits.data[0] as number))));
    }
    return scores;
  } finally {
    await model.dispose();
  }
}
