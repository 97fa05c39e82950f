export { createTextCompletionApp, startTextCompletionApp } from './text-completion-app.js';
export type { EmbeddingsAppOptions, TextCompletionAppOptions } from '../app-options.js';
export { createEmbeddingsApp, startEmbeddingsApp } from './embeddings-app.js';
export { createEncoderApp, startEncoderApp } from './encoder-app.js';
export type { EncoderAppOptions } from '../encoder-routes.js';
export { createMultiModelApp, startMultiModelApp } from './multi-model-app.js';
