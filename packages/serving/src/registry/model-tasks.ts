// What each model task serves: the OpenAI endpoints it answers, how they are made over a loaded service, and how
// the service's metrics are recorded. One row per task; a task added here (an encoder's `text-classification`,
// `rerank`) is routed, listed and refused on the other endpoints without a change elsewhere.
import type { AnyRegistry } from '@microbatch/prometheus';
import { createGenerationMetrics, instrumentBatcher } from '@microbatch/prometheus';
import type { ClientKey } from '../endpoints/client-key.js';
import { createChatCompletionsEndpoint } from '../endpoints/chat-endpoint.js';
import { createCompletionsEndpoint } from '../endpoints/completions-endpoint.js';
import { createEmbeddingsEndpoint } from '../endpoints/embeddings-endpoint.js';
import {
  createClassifyEndpoint,
  createRerankEndpoint,
  createScoreEndpoint,
  documentLimits,
} from '../endpoints/encoder-endpoints.js';
import type { NodeJsonEndpoint } from '../endpoints/openai-endpoint.js';
import type { ChatRequestLimits } from '../openai/chat-request.js';
import type { CompletionRequestLimits } from '../openai/completion-request.js';
import type { EmbeddingsRequestLimits } from '../openai/embeddings-request.js';
import type { EncoderRequestLimits } from '../openai/encoder-fields.js';
import type { ClassifierService } from '../service/classifier-service.js';
import type { EmbeddingService } from '../service/embedding-service.js';
import { instrumentTextCompletionService } from '../service/service-metrics.js';
import type { TextCompletionService } from '../service/text-completion-service.js';

/**
 * The OpenAI endpoints a multi-model app routes by the body's `model`, each with its path.
 *
 * @example
 * ```ts
 * MODEL_ENDPOINTS.embeddings; // '/v1/embeddings'
 * ```
 */
export const MODEL_ENDPOINTS = {
  completions: '/v1/completions',
  chatCompletions: '/v1/chat/completions',
  embeddings: '/v1/embeddings',
  /** Also answered at `/rerank` (TEI's path). */
  rerank: '/v1/rerank',
  score: '/v1/score',
  classify: '/classify',
} as const;

/** The name of one of {@link MODEL_ENDPOINTS}. */
export type ModelEndpointName = keyof typeof MODEL_ENDPOINTS;

/** What the endpoints of one loaded model share: the app's options. */
export interface ModelEndpointOptions {
  readonly clientKey?: ClientKey | undefined;
  /** One prefix cache for every tenant (`TextCompletionAppOptions.sharedPrefixCache`). */
  readonly sharedPrefixCache?: boolean;
  readonly exposeDetails: boolean;
  readonly limits?: CompletionRequestLimits | undefined;
  readonly chatLimits?: ChatRequestLimits | undefined;
  readonly embeddingsLimits?: EmbeddingsRequestLimits | undefined;
  /** Bounds of rerank, score and classify requests (documents per request, characters per text). */
  readonly encoderLimits?: EncoderRequestLimits | undefined;
}

/**
 * One task's row: the endpoints it answers, made over a loaded service of that task, and its metrics recorded in
 * the model's own registry (labelled by `model` there).
 */
export interface ModelTaskRow<Service> {
  readonly endpoints: readonly ModelEndpointName[];
  readonly makeEndpoints: (
    service: Service,
    registry: AnyRegistry,
    options: ModelEndpointOptions,
  ) => Partial<Record<ModelEndpointName, NodeJsonEndpoint>>;
}

/** What each task's service is. */
export interface ModelServices {
  readonly 'text-generation': TextCompletionService;
  readonly 'feature-extraction': EmbeddingService;
  readonly rerank: ClassifierService;
  readonly 'text-classification': ClassifierService;
}

/**
 * The tasks a multi-model app serves.
 *
 * @example
 * ```ts
 * MODEL_TASK_NAMES; // ['text-generation', 'feature-extraction', 'rerank', 'text-classification']
 * ```
 */
export type ModelTask = keyof ModelServices;

const textGeneration: ModelTaskRow<TextCompletionService> = {
  endpoints: ['completions', 'chatCompletions'],
  makeEndpoints: (service, registry, options) => {
    instrumentTextCompletionService(service, registry);
    const generation = createGenerationMetrics({ model: service.id, registry });
    const endpoint = {
      clientKey: options.clientKey,
      generation,
      exposeDetails: options.exposeDetails,
      sharedPrefixCache: options.sharedPrefixCache ?? false,
    };
    return {
      completions: createCompletionsEndpoint(service, { ...endpoint, limits: options.limits ?? {} }),
      chatCompletions: createChatCompletionsEndpoint(service, { ...endpoint, limits: options.chatLimits ?? {} }),
    };
  },
};

const featureExtraction: ModelTaskRow<EmbeddingService> = {
  endpoints: ['embeddings'],
  makeEndpoints: (service, registry, options) => {
    for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
    return {
      embeddings: createEmbeddingsEndpoint(service, {
        exposeDetails: options.exposeDetails,
        limits: options.embeddingsLimits ?? {},
        clientKey: options.clientKey,
      }),
    };
  },
};

/** The encoder endpoints' options over one classifier: its batcher instrumented, `maxDocuments` within its queue. */
function encoderEndpointOptions(service: ClassifierService, registry: AnyRegistry, options: ModelEndpointOptions) {
  for (const batcher of service.batchers) instrumentBatcher(batcher, { registry });
  return {
    exposeDetails: options.exposeDetails,
    limits: documentLimits(service, options.encoderLimits ?? {}),
    clientKey: options.clientKey,
  };
}

// A cross-encoder: `POST /v1/rerank` (and `/rerank`) and `/v1/score`, as `serve --task rerank` answers them.
const rerank: ModelTaskRow<ClassifierService> = {
  endpoints: ['rerank', 'score'],
  makeEndpoints: (service, registry, options) => {
    const endpoint = encoderEndpointOptions(service, registry, options);
    return { rerank: createRerankEndpoint(service, endpoint), score: createScoreEndpoint(service, endpoint) };
  },
};

const textClassification: ModelTaskRow<ClassifierService> = {
  endpoints: ['classify'],
  makeEndpoints: (service, registry, options) => ({
    classify: createClassifyEndpoint(service, encoderEndpointOptions(service, registry, options)),
  }),
};

/**
 * The task table: task → its row.
 *
 * @example
 * ```ts
 * MODEL_TASKS['feature-extraction'].endpoints; // ['embeddings']
 * ```
 */
export const MODEL_TASKS: { readonly [Task in ModelTask]: ModelTaskRow<ModelServices[Task]> } = {
  'text-generation': textGeneration,
  'feature-extraction': featureExtraction,
  rerank,
  'text-classification': textClassification,
};

/**
 * The task names, in the table's order.
 *
 * @example
 * ```ts
 * MODEL_TASK_NAMES.includes('text-generation'); // true
 * ```
 */
export const MODEL_TASK_NAMES = Object.keys(MODEL_TASKS) as readonly ModelTask[];

/**
 * The tasks whose models answer `endpoint` (for the 400 that names both).
 *
 * @example
 * ```ts
 * tasksServing('embeddings'); // ['feature-extraction']
 * ```
 */
export function tasksServing(endpoint: ModelEndpointName): ModelTask[] {
  return MODEL_TASK_NAMES.filter((task) => MODEL_TASKS[task].endpoints.includes(endpoint));
}
