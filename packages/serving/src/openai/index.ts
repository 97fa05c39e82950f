// openai/: OpenAI's wire protocol, and nothing else of serving's: the request bodies (`parse*Request`: checked field
// by field, a bad one a 400 naming it as `param`), the answers (completions, chat, their chunks, the model list),
// chat templates (how messages become a prompt) and the error shape (`{ error: { message, type, param, code } }`).
// It imports no other folder of the package: the endpoints and the services build on it.
export {
  IGNORED_COMPLETION_FIELDS,
  MIN_TEMPERATURE,
  OPENAI_DEFAULT_MAX_TOKENS,
  parseCompletionRequest,
} from './completion-request.js';
export type { CompletionRequest, CompletionRequestLimits } from './completion-request.js';
export { completionMeta, toCompletion, toCompletionChunk, toUsageChunk } from './completion-response.js';
export type { Completion, CompletionChoice, CompletionMeta } from './completion-response.js';
export { parseChatRequest } from './chat-request.js';
export type { ChatRequest, ChatRequestLimits } from './chat-request.js';
export { chatMeta, toChatChunk, toChatCompletion, toChatUsageChunk, toolCallDeltas } from './chat-response.js';
export type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatFinishReason,
  ChatLogprobs,
  ChatMeta,
  ToolCallDelta,
} from './chat-response.js';
export { PLAIN_CHAT_TEMPLATE, loadChatTemplate } from './chat-template.js';
export type { ChatMessage, ChatMessageToolCall, ChatTemplate, ChatTemplateTool } from './chat-template.js';
export { readStructuredOutput } from './response-format.js';
export { parseToolCalls, readTools, toolGrammar } from './tool-calls.js';
export type { ToolCall, ToolFunction, ToolRequest } from './tool-calls.js';
export { modelList } from './model-list.js';
export type { ModelList, ModelObject } from './model-list.js';
export { parseEmbeddingsRequest } from './embeddings-request.js';
export type { EmbeddingsRequest, EmbeddingsRequestLimits } from './embeddings-request.js';
export { writeOpenAiError } from './openai-error.js';
export { parseRerankRequest } from './rerank-request.js';
export type { RerankRequest } from './rerank-request.js';
export { parseScoreRequest } from './score-request.js';
export type { ScoreRequest } from './score-request.js';
export { parseClassifyRequest } from './classify-request.js';
export type { ClassifyRequest } from './classify-request.js';
export { checkTokenCounts } from './encoder-fields.js';
export type { EncoderRequestLimits, EncoderTexts } from './encoder-fields.js';
