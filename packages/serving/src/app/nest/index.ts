import 'reflect-metadata';

export { DecodeBatchInterceptor } from './decode-batch.interceptor.js';
export type { DecodeBatchAnswer } from './decode-batch.interceptor.js';
export { PlainTextInterceptor } from './plain-text.interceptor.js';
export { startTextCompletionApp } from './start.js';
export { TEXT_COMPLETION_APP_OPTIONS, TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';
export { TextCompletionController } from './text-completion.controller.js';
export { TextCompletionModule } from './text-completion.module.js';
export { TextQueryPipe } from './text-query.pipe.js';
export type { EmbeddingsAppOptions, TextCompletionAppOptions } from '../app-options.js';
export {
  EMBEDDINGS_APP_OPTIONS,
  EMBEDDING_SERVICE,
  EmbeddingsController,
  EmbeddingsModule,
} from './embeddings.module.js';
export { startEmbeddingsApp } from './start-embeddings.js';
export type { EncoderAppOptions } from '../encoder-routes.js';
export {
  CLASSIFIER_SERVICE,
  ClassifyController,
  ENCODER_APP_OPTIONS,
  EncoderModule,
  RerankController,
} from './encoder.module.js';
export { startEncoderApp } from './start-encoder.js';
export {
  MODEL_REGISTRY,
  MULTI_MODEL_APP_OPTIONS,
  MultiModelController,
  MultiModelModule,
} from './multi-model.module.js';
export { startMultiModelApp } from './start-multi-model.js';
