// `@microbatch/test-kit`: what the repository's tests, examples and benchmarks share (private, loaded from source).
export { startProcess, startServerProcess } from './child-process.js';
export type { ChildHandle, ExitInfo, ProcessOptions, ServerProcess, ServerProcessOptions } from './child-process.js';
export { deferred, settleOf } from './deferred.js';
export type { Deferred, Settlement } from './deferred.js';
export { closeServer, listen, serverUrlOf } from './http-server.js';
export type { TestServer } from './http-server.js';
export { ManualClock, flush } from './manual-clock.js';
export { parseSse, readSse, sseValues } from './sse.js';
export type { SseMessage } from './sse.js';
export { pollUntil, waitFor } from './wait-for.js';
export { samplesOf } from './metrics-text.js';
export { startRedisServer } from './redis-server.js';
export type { TestRedis } from './redis-server.js';
export { DataType, encodeModel, encodeModelParts, writeModel } from './onnx-writer.js';
export type { Initializer, ModelSpec, NodeSpec, ValueInfo } from './onnx-writer.js';
export { llamaConfig, llamaParameters, llamaSignature, writeLlamaModel } from './llama-decoder.js';
export type { LlamaShape, WrittenLlama } from './llama-decoder.js';
