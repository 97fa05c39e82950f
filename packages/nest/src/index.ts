export { BATCH_MODULE_OPTIONS } from './batch.constants.js';
export { Batch } from './batch.decorator.js';
export { BatchInterceptor } from './batch.interceptor.js';
export { BatchModule } from './batch.module.js';
export type { BatchModuleAsyncOptions } from './batch.module.js';
export type { BatchModuleOptions, BatchOptions, BatchedOptions } from './batch.options.js';
export { BatchRegistry } from './batch.registry.js';
export { batched } from './batched.helper.js';
export type { BatchedMethod, StreamingBatchedMethod } from './batched.helper.js';
