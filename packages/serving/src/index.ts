export { isLogger, logBatches, logDecodeLoop, logRefusals } from './batch-log.js';
export type { DecodeLoopSource, LogLine, LogTarget, Logger } from './batch-log.js';
export type { EmbeddingsAppOptions, TextCompletionAppOptions } from './app-options.js';
export { clientAddress, clientKeyFromHeader, fairnessKeyOf } from './client-key.js';
export type { ClientKey } from './client-key.js';
export { ReplicaAdmission } from './replica-admission.js';
export {
  IGNORED_COMPLETION_FIELDS,
  MIN_TEMPERATURE,
  OPENAI_DEFAULT_MAX_TOKENS,
  parseCompletionRequest,
} from './completion-request.js';
export type { CompletionRequest, CompletionRequestLimits } from './completion-request.js';
export {
  completionMeta,
  decodeBatchHeaders,
  setDecodeBatchHeaders,
  toCompletion,
  toCompletionChunk,
  toUsageChunk,
} from './completion-response.js';
export type { Completion, CompletionChoice, CompletionMeta } from './completion-response.js';
export { createCompletionsEndpoint } from './completions-endpoint.js';
export { createChatCompletionsEndpoint } from './chat-endpoint.js';
export type { ChatCompletionsEndpoint, ChatCompletionsModel } from './chat-endpoint.js';
export { parseChatRequest } from './chat-request.js';
export type { ChatRequest, ChatRequestLimits } from './chat-request.js';
export { chatMeta, toChatChunk, toChatCompletion, toChatUsageChunk } from './chat-response.js';
export type { ChatCompletion, ChatCompletionChunk, ChatLogprobs, ChatMeta } from './chat-response.js';
export { PLAIN_CHAT_TEMPLATE, loadChatTemplate } from './chat-template.js';
export type { ChatMessage, ChatTemplate } from './chat-template.js';
export type { CompletionsEndpoint, CompletionsModel } from './completions-endpoint.js';
export { shutdownServer } from './graceful-shutdown.js';
export type { ShutdownSteps } from './graceful-shutdown.js';
export { mergeStreams } from './merge-streams.js';
export { listen, listenOptionsFromEnv, serverUrl, startServer } from './serve.js';
export type { ListenOptions, RunningServer, ServerLifecycle } from './serve.js';
export { createTextCompletionModel, textCompletionCost } from './text-completion-model.js';
export type {
  TextCompletionModel,
  TextCompletionModelOptions,
  TextCompletionService,
} from './text-completion-model.js';
export { TEXT_QUERY_DEFAULTS, parseTextQuery, textQueryAnswer } from './text-query.js';
export { bundledModelDir, startTextCompletionServer } from './text-completion-server.js';
export type { TextCompletionServerOptions } from './text-completion-server.js';
export { TEXT_COMPLETION_HANDLERS, createQueuedTextCompletionService } from './queued-service.js';
export type { QueuedTextCompletionServiceOptions, TextCompletionQueue } from './queued-service.js';
export { modelList } from './models-endpoint.js';
export type { ModelList, ModelObject } from './models-endpoint.js';
export { createEmbeddingModel, folderPooling } from './embedding-model.js';
export type { EmbeddingItem, EmbeddingModelOptions, EmbeddingService } from './embedding-model.js';
export { normalized, poolEmbedding } from './embedding-pooling.js';
export type { Pooling } from './embedding-pooling.js';
export { createEmbeddingsEndpoint } from './embeddings-endpoint.js';
export type { EmbeddingList, EmbeddingsEndpoint } from './embeddings-endpoint.js';
export { parseEmbeddingsRequest } from './embeddings-request.js';
export type { EmbeddingsRequest, EmbeddingsRequestLimits } from './embeddings-request.js';
export { EMBEDDINGS_ROUTES, noEmbeddingsRoute } from './embeddings-routes.js';
export { writeOpenAiError } from './openai-error.js';
