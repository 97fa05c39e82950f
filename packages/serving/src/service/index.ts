// service/: what the endpoints serve, apart from HTTP: the service contracts (`TextCompletionService`,
// `EmbeddingService`, each in a file of its own), the models behind batchers in this process
// (`createTextCompletionModel`, `createEmbeddingModel`) or behind a shared queue (`createQueuedTextCompletionService`,
// `ReplicaAdmission`; the encoders' `createQueuedEmbeddingService`, `createQueuedSequenceClassifier` and the worker side,
// `createEncoderWorker`), their option checks, logs and metrics. It may read OpenAI's types (a chat template), never an
// endpoint or an app.
export { isLogger, logBatches, logDecodeLoop, logRefusals } from './batch-log.js';
export type { DecodeLoopSource, LogLine, LogTarget, Logger } from './batch-log.js';
export { ReplicaAdmission } from './replica-admission.js';
export { createTextCompletionModel, textCompletionCost } from './text-completion-model.js';
export type { TextCompletionModel } from './text-completion-model.js';
export type { TextCompletionModelOptions } from './text-completion-options.js';
export type { TextCompletionService } from './text-completion-service.js';
export { TEXT_COMPLETION_HANDLERS, createQueuedTextCompletionService } from './queued-service.js';
export type { QueuedTextCompletionServiceOptions, TextCompletionQueue } from './queued-service.js';
export { createEmbeddingModel } from './embedding-model.js';
export type { EmbeddingModelOptions } from './embedding-model.js';
export type { EncoderBatcherOptions } from './encoder-batcher.js';
export type { EmbeddingItem, EmbeddingService } from './embedding-service.js';
export { normalized, poolEmbedding } from './embedding-pooling.js';
export type { Pooling } from './embedding-pooling.js';
export { createSequenceClassifier } from './sequence-classifier.js';
export type { SequenceClassifierOptions } from './sequence-classifier.js';
export type { ClassifierItem, ClassifierService, ClassifierTask } from './classifier-service.js';
export { labelActivation, labelProbabilities, sigmoid } from './label-scores.js';
export type { LabelActivation } from './label-scores.js';
export { folderPooling, readEncoderFolder } from './encoder-folder.js';
export type { EncoderFolder, EncoderTask } from './encoder-folder.js';
export { ENCODER_HANDLERS, floatsFromWire, floatsToWire } from './encoder-wire.js';
export type { ClassifierEntry, EmbedAnswer, EmbedEntry, LogitsAnswer } from './encoder-wire.js';
export { createEncoderWorker } from './encoder-worker.js';
export type { EncoderWorker, EncoderWorkerOptions } from './encoder-worker.js';
export { createQueuedEmbeddingService, createQueuedSequenceClassifier } from './queued-encoder-services.js';
export type {
  EncoderQueue,
  QueuedClassifierOptions,
  QueuedEmbeddingOptions,
  QueuedEncoderOptions,
} from './queued-encoder-services.js';
