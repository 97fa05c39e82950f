// app/: the ready-made apps: one route table per app (`text-completion-routes.ts`, `embeddings-routes.ts`, mounted
// through `route-table.ts`), each framework's small glue (`express/`, `koa/`, `fastify/`, `hono/`, `nest/`: the
// package's subpath entries), the options they take, and the Node server they listen on (limits, graceful
// shutdown). The top of the package: it reads the endpoints, the services and OpenAI's protocol; nothing reads it.
export type { EmbeddingsAppOptions, TextCompletionAppOptions } from './app-options.js';
export { shutdownServer } from './graceful-shutdown.js';
export type { ShutdownSteps } from './graceful-shutdown.js';
export { listen, listenOptionsFromEnv, serverUrl, startServer } from './serve.js';
export type { ListenOptions, RunningServer, ServerLifecycle } from './serve.js';
export { bundledModelDir, startTextCompletionServer } from './text-completion-server.js';
export type { TextCompletionServerOptions } from './text-completion-server.js';
export { EMBEDDINGS_ROUTES, noEmbeddingsRoute } from './embeddings-routes.js';
export { ENCODER_ROUTES, ENCODER_TABLES, noEncoderRoute } from './encoder-routes.js';
export type { EncoderAppOptions } from './encoder-routes.js';
export { MULTI_MODEL_TABLE, noMultiModelRoute } from './multi-model-routes.js';
export type { MultiModelAppOptions } from './multi-model-routes.js';
