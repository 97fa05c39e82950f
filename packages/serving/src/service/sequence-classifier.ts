// A sequence-classification model (or cross-encoder) in worker threads of this process behind one batcher: the
// `ClassifierService` the classify, rerank and score apps serve. Texts and pairs are tokenized on a tokenizer thread
// of their own (never the main thread), before anything is queued, so cost, usage and the length checks are exact;
// the workers run the raw ONNX graph (`logits`), and the scores are computed here as transformers.js computes them.
import { checkOneOf } from '@microbatch/core/util';
import type { ModelDtype, OnnxOutput } from '@microbatch/inference';
import type { ClassifierItem, ClassifierService, ClassifierTask } from './classifier-service.js';
import { type EncoderBatcherOptions, encoderGraph, startEncoderBatcher } from './encoder-batcher.js';
import { encoderFolder, readEncoderFolder } from './encoder-folder.js';
import { labelProbabilities, sigmoid } from './label-scores.js';

const TASKS: readonly ClassifierTask[] = ['text-classification', 'rerank'];

/**
 * Options of {@link createSequenceClassifier}.
 *
 * @example
 * ```ts
 * const options: SequenceClassifierOptions = { model: 'models/ms-marco-MiniLM-L-6-v2', task: 'rerank' };
 * ```
 */
export interface SequenceClassifierOptions extends EncoderBatcherOptions {
  /**
   * The model folder in transformers.js layout: `config.json` (with `id2label`), `tokenizer.json`, an ONNX graph
   * under `onnx/` (which one: `dtype`) with a `logits` output (`[batch, labels]`).
   */
  readonly model: string;
  /**
   * What is served: label probabilities per text, or (a cross-encoder, one label) a relevance score per pair.
   * @default 'text-classification'
   */
  readonly task?: ClassifierTask;
  /**
   * Which of the folder's ONNX files the workers load, as transformers.js names them; `'auto'`: the first present.
   * @default 'auto'
   */
  readonly dtype?: 'auto' | ModelDtype;
  /**
   * The name responses report as `model`.
   * @default the folder's name
   */
  readonly id?: string;
  /**
   * The most items waiting; one rerank request's documents are one group, so keep it above the endpoint's
   * `maxDocuments`.
   * @default 4096
   */
  readonly maxQueueSize?: number;
}

/**
 * Starts a sequence classifier (a BERT-style `...ForSequenceClassification` export in transformers.js layout) on
 * worker threads behind one batcher whose items cost their token count: a model call holds at most `maxBatchSize`
 * items and `maxBatchCost` tokens, batched by length bucket and padded to its own longest. With `task: 'rerank'` the
 * model must have one label (a cross-encoder) and is given text pairs.
 *
 * @example
 * ```ts
 * const reranker = createSequenceClassifier({ model: 'models/ms-marco-MiniLM-L-6-v2', task: 'rerank' });
 * await reranker.ready;
 * ```
 */
export function createSequenceClassifier(options: SequenceClassifierOptions): ClassifierService {
  if (typeof options !== 'object' || options === null) throw new TypeError('Expected `options` to be an object');
  const dir = encoderFolder(options.model, 'model');
  const task = checkOneOf('task', options.task ?? 'text-classification', TASKS);
  const graph = encoderGraph(dir, options.dtype);
  const folder = readEncoderFolder(dir, task);
  const { labels, activation, withTypes } = folder;
  const encoder = startEncoderBatcher(options, {
    dir,
    graph,
    output: 'logits',
    name: task === 'rerank' ? 'rerank' : 'classify',
    maxQueueSize: 4096,
    maxPositions: folder.maxTokens,
  });
  const { batcher, tokenizer, tokens } = encoder;
  // BERT-style models take segment ids (0 for a text and a pair's first part, 1 for its second): `withTypes`.
  const logitsOf = (output: OnnxOutput): Float32Array => {
    const logits = output.logits;
    if (logits === undefined || logits.dims.length !== 1 || logits.dims[0] !== labels.length) {
      throw new Error(`Expected logits of [${labels.length}], got [${logits?.dims.join(', ') ?? ''}]`);
    }
    return logits.data as Float32Array;
  };
  return {
    id: options.id ?? folder.name,
    task,
    labels,
    maxTokens: encoder.maxTokens,
    maxQueueSize: encoder.maxQueueSize,
    batcher,
    batchers: [batcher],
    ready: encoder.ready,
    isReady: encoder.isReady,
    encodeAll: async (texts, encodeOptions) => {
      const { encodings, stoppedAt } = await tokenizer.encodeAll(texts, encodeOptions);
      const items = encodings.map(({ ids, typeIds }): ClassifierItem =>
        withTypes ? { input_ids: ids, token_type_ids: typeIds } : { input_ids: ids },
      );
      return { items, stoppedAt };
    },
    tokens,
    classifyAll: async (items, call) =>
      (await batcher.callAll(items, call)).map((output) => labelProbabilities(logitsOf(output), activation)),
    scoreAll: async (items, call) =>
      (await batcher.callAll(items, call)).map((output) => sigmoid(logitsOf(output)[0] as number)),
    drain: encoder.drain,
    close: encoder.close,
  };
}
