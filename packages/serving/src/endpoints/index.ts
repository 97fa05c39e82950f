// endpoints/: requests answered on a Node response, the same on every framework. The OpenAI endpoints share one
// skeleton (`openai-endpoint.ts`: parse, fairness key, admission, whole or streamed answer, generation metrics,
// OpenAI-shaped errors); completions and chat share their generation (`text-generations.ts`); the tutorial's
// `GET /?text=` is here too. They read the services and OpenAI's protocol, never an app.
export { clientAddress, clientKeyFromHeader, fairnessKeyOf } from './client-key.js';
export type { ClientKey } from './client-key.js';
export { decodeBatchHeaders, setDecodeBatchHeaders } from './decode-batch-headers.js';
export { createCompletionsEndpoint } from './completions-endpoint.js';
export type { CompletionsEndpoint, CompletionsEndpointOptions, CompletionsModel } from './completions-endpoint.js';
export { createChatCompletionsEndpoint } from './chat-endpoint.js';
export type { ChatCompletionsEndpoint, ChatCompletionsEndpointOptions, ChatCompletionsModel } from './chat-endpoint.js';
export { createEmbeddingsEndpoint } from './embeddings-endpoint.js';
export type { EmbeddingList, EmbeddingsEndpoint, EmbeddingsEndpointOptions } from './embeddings-endpoint.js';
export { mergeStreams } from './merge-streams.js';
export { TEXT_QUERY_DEFAULTS, parseTextQuery, textQueryAnswer } from './text-query.js';
export { createClassifyEndpoint, createRerankEndpoint, createScoreEndpoint } from './encoder-endpoints.js';
export type {
  ClassifyAnswer,
  EncoderEndpointFactory,
  EncoderEndpointOptions,
  RerankAnswer,
  ScoreAnswer,
} from './encoder-endpoints.js';
