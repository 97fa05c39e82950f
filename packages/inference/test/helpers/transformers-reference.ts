// What transformers.js itself makes of a model folder, the reference microbatch is compared with: its own
// `pipeline(task, dir, { dtype })`, never a copy of its logic. Used by the compatibility matrix (the pools) and by
// the CLI's tests (`microbatch serve` over HTTP), so both compare with the same thing. Local files only: the
// folder's parent becomes transformers.js's `localModelPath` and nothing is fetched.
import { basename, dirname, sep } from 'node:path';
import { env, pipeline } from '@huggingface/transformers';
import type {
  FeatureExtractionPipeline,
  TextClassificationPipeline,
  TextGenerationPipeline,
} from '@huggingface/transformers';
import type { ModelDtype } from '../../src/index.js';

/** A greedy generation: its token ids and its text. */
export interface Greedy {
  readonly tokens: readonly number[];
  readonly text: string;
}

/** Points transformers.js at `dir`'s parent, offline, and returns the name it loads `dir` by. */
function localName(dir: string): string {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = dirname(dir) + sep;
  return basename(dir);
}

/**
 * What transformers.js's text-generation pipeline generates greedily for each prompt, one at a time: its text, and
 * the ids its model's `generate` picks for the same prompt (the pipeline returns text only). Prompts are tokenized
 * with the tokenizer's special tokens, as microbatch tokenizes them.
 *
 * @example
 * ```ts
 * const [first] = await transformersGreedy(dir, 'q4', 'model', ['Once upon a time'], 6);
 * ```
 */
export async function transformersGreedy(
  dir: string,
  dtype: ModelDtype,
  graph: string,
  prompts: readonly string[],
  maxNewTokens: number,
): Promise<Greedy[]> {
  const generator: TextGenerationPipeline = await pipeline('text-generation', localName(dir), {
    dtype,
    model_file_name: graph,
    device: 'cpu',
  });
  try {
    const greedy: Greedy[] = [];
    for (const prompt of prompts) {
      const options = { max_new_tokens: maxNewTokens, do_sample: false, add_special_tokens: true };
      const [output] = (await generator(prompt, { ...options, return_full_text: false })) as {
        generated_text: string;
      }[];
      const inputs = generator.tokenizer(prompt, { add_special_tokens: true });
      const ids = (await generator.model.generate({ ...inputs, ...options })) as { tolist(): bigint[][] };
      const all = (ids.tolist()[0] ?? []).map(Number);
      const prompted = (inputs.input_ids as { dims: number[] }).dims.at(-1) ?? 0;
      greedy.push({ tokens: all.slice(prompted), text: output?.generated_text ?? '' });
    }
    return greedy;
  } finally {
    await generator.dispose();
  }
}

/**
 * transformers.js's feature-extraction pipeline on `texts`, mean-pooled and L2-normalised (sentence-transformers'
 * defaults, which the generated encoders' `1_Pooling/config.json` and `modules.json` ask for).
 *
 * @example
 * ```ts
 * const [vector] = await transformersEmbeddings(dir, 'q8', ['Hello world']);
 * ```
 */
export async function transformersEmbeddings(
  dir: string,
  dtype: ModelDtype,
  texts: readonly string[],
): Promise<number[][]> {
  const extractor: FeatureExtractionPipeline = await pipeline('feature-extraction', localName(dir), {
    dtype,
    device: 'cpu',
  });
  try {
    const output = await extractor([...texts], { pooling: 'mean', normalize: true });
    return output.tolist() as number[][];
  } finally {
    await extractor.dispose();
  }
}

/**
 * transformers.js's text-classification pipeline on `texts` as one batch (as a pool given them in one call runs
 * them: a dynamically quantized graph's activation scale is per tensor, so a q8 model's scores depend on what shares
 * the batch), `topK` labels per text with their scores, best first.
 *
 * @example
 * ```ts
 * const [labels] = await transformersClassification(dir, 'q8', ['I loved it'], 2);
 * ```
 */
export async function transformersClassification(
  dir: string,
  dtype: ModelDtype,
  texts: readonly string[],
  topK: number,
): Promise<{ label: string; score: number }[][]> {
  const classifier: TextClassificationPipeline = await pipeline('text-classification', localName(dir), {
    dtype,
    device: 'cpu',
  });
  try {
    const output = (await classifier([...texts], { top_k: topK })) as unknown as { label: string; score: number }[][];
    return output.map((labels) => (Array.isArray(labels) ? labels : [labels]));
  } finally {
    await classifier.dispose();
  }
}

/**
 * The pipeline's text is the decoded prompt and continuation less the decoded prompt, so it keeps the word-initial
 * space that decoding the new tokens alone (as microbatch does, and as a stream does chunk by chunk) drops.
 *
 * @example
 * ```ts
 * seamless(' Lily ran'); // 'Lily ran'
 * ```
 */
export const seamless = (text: string): string => text.trimStart();
