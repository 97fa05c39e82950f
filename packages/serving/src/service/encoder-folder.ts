// What an encoder's folder says about the model, read the same way on both sides of a queue: a web replica (which
// has the folder's `config.json` and tokenizer but loads no graph) and the queue worker (which runs the graph).
// Reading it once here keeps the two sides agreeing on sizes, labels and pooling; the in-process encoder services
// (`embedding-model.ts`, `sequence-classifier.ts`) read their folders here too.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { ClassifierTask } from './classifier-service.js';
import type { Pooling } from './embedding-pooling.js';
import { type LabelActivation, labelActivation } from './label-scores.js';

/** The tasks an encoder folder can serve over a queue: embeddings, or a sequence classifier's two. */
export type EncoderTask = 'feature-extraction' | ClassifierTask;

/**
 * The facts of an encoder folder both sides of a queue need.
 *
 * @example
 * ```ts
 * const { maxTokens, dimensions } = readEncoderFolder('models/all-MiniLM-L6-v2', 'feature-extraction');
 * ```
 */
export interface EncoderFolder {
  /** The folder, resolved. */
  readonly dir: string;
  /** The folder's name: the queue's and the answers' `model` by default. */
  readonly name: string;
  /** The most tokens one text (or pair) may have: `max_position_embeddings`, else 512. */
  readonly maxTokens: number;
  /** Token ids are from 0 to `vocabSize - 1`. */
  readonly vocabSize: number;
  /** BERT-style models take segment ids (`type_vocab_size` in `config.json`). */
  readonly withTypes: boolean;
  /** Embeddings: `hidden_size`. Classifiers: 0. */
  readonly dimensions: number;
  /** Embeddings: sentence-transformers' pooling and normalisation where the folder says (else undefined). */
  readonly pooling: Pooling | undefined;
  readonly normalize: boolean | undefined;
  /** Classifiers: the labels in id order (`id2label`); embeddings: none. */
  readonly labels: readonly string[];
  /** Classifiers: how logits become probabilities. */
  readonly activation: LabelActivation;
}

/**
 * The model folder, resolved, once it has a transformers.js `config.json` and `tokenizer.json` (else an `Error`
 * saying it is not a transformers.js `what`).
 *
 * @example
 * ```ts
 * const dir = encoderFolder('models/all-MiniLM-L6-v2', 'embedding model');
 * ```
 */
export function encoderFolder(model: string, what: string): string {
  const dir = resolve(model);
  for (const file of ['config.json', 'tokenizer.json']) {
    if (!existsSync(join(dir, file))) throw new Error(`${dir} is not a transformers.js ${what}: no ${file}`);
  }
  return dir;
}

function readJson<T>(path: string): T | undefined {
  if (!existsSync(path)) return undefined;
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/**
 * sentence-transformers' pooling and normalisation, read from the folder where it says.
 *
 * @example
 * ```ts
 * const { pooling, normalize } = folderPooling('models/all-MiniLM-L6-v2'); // 'mean', true
 * ```
 */
export function folderPooling(dir: string): { pooling: Pooling | undefined; normalize: boolean | undefined } {
  const config = readJson<Record<string, unknown>>(join(dir, '1_Pooling', 'config.json'));
  let pooling: Pooling | undefined;
  if (config !== undefined) {
    if (config.pooling_mode_cls_token === true) pooling = 'cls';
    else if (config.pooling_mode_lasttoken === true) pooling = 'last_token';
    else if (config.pooling_mode_mean_tokens === true) pooling = 'mean';
    else {
      throw new Error(
        `${join(dir, '1_Pooling', 'config.json')} asks for a pooling mode this server does not have (mean, cls, last token)`,
      );
    }
  }
  const modules = readJson<Array<{ type?: unknown }>>(join(dir, 'modules.json'));
  const normalize = modules?.some((module) => String(module.type).endsWith('.Normalize'));
  return { pooling, normalize };
}

interface FolderConfig {
  readonly hidden_size?: number;
  readonly max_position_embeddings?: number;
  readonly vocab_size?: number;
  readonly type_vocab_size?: number;
  readonly id2label?: Record<string, unknown>;
  readonly problem_type?: unknown;
}

/** `id2label` as a list in id order; ids must be 0 to n - 1. */
function labelsOf(config: FolderConfig, path: string): string[] {
  const entries = Object.entries(config.id2label ?? {});
  if (entries.length === 0) throw new Error(`${path} has no \`id2label\`: not a sequence-classification model`);
  const labels = Array.from({ length: entries.length }, (_, id) => config.id2label?.[String(id)]);
  if (labels.some((label) => typeof label !== 'string')) {
    throw new Error(`${path}'s \`id2label\` must map the ids 0 to ${entries.length - 1} to label names`);
  }
  return labels as string[];
}

/**
 * Reads an encoder folder in transformers.js layout (`config.json`, `tokenizer.json`; no graph needed) for `task`,
 * throwing an `Error` naming the file when it cannot serve it: no `hidden_size` for embeddings, no `id2label` for a
 * classifier, more than one label for a cross-encoder (`rerank`).
 *
 * @example
 * ```ts
 * readEncoderFolder('models/ms-marco-MiniLM-L-6-v2', 'rerank').labels; // ['LABEL_0']
 * ```
 */
export function readEncoderFolder(model: string, task: EncoderTask): EncoderFolder {
  const dir = encoderFolder(model, 'model');
  const path = join(dir, 'config.json');
  const config = JSON.parse(readFileSync(path, 'utf8')) as FolderConfig;
  const common = {
    dir,
    name: basename(dir),
    maxTokens: config.max_position_embeddings ?? 512,
    vocabSize: config.vocab_size ?? Number.MAX_SAFE_INTEGER,
    withTypes: config.type_vocab_size !== undefined,
  };
  if (task === 'feature-extraction') {
    const dimensions = config.hidden_size;
    if (!Number.isInteger(dimensions) || (dimensions as number) < 1) throw new Error(`${path} has no \`hidden_size\``);
    return {
      ...common,
      dimensions: dimensions as number,
      ...folderPooling(dir),
      labels: [],
      activation: 'softmax',
    };
  }
  const labels = labelsOf(config, path);
  if (task === 'rerank' && labels.length !== 1) {
    throw new Error(`${path} has ${labels.length} labels; a rerank model (cross-encoder) has one relevance logit`);
  }
  return {
    ...common,
    dimensions: 0,
    pooling: undefined,
    normalize: undefined,
    labels,
    activation: labelActivation(config, labels.length),
  };
}
