// registry/: several models in one process: the registry (by name, eager or lazy loading, at most N loaded, the least
// recently used idle one unloaded), the task table (which endpoints each task answers), the one thread budget, and
// the merged per-model metrics. The apps route each request by its `model` through it (`app/multi-model-routes.ts`).
export { createModelRegistry } from './model-registry.js';
export type {
  ModelDefinition,
  ModelLease,
  ModelRegistry,
  ModelRegistryOptions,
  ModelService,
  ModelState,
} from './model-registry.js';
export { MODEL_ENDPOINTS, MODEL_TASKS, MODEL_TASK_NAMES, tasksServing } from './model-tasks.js';
export type { ModelEndpointName, ModelServices, ModelTask } from './model-tasks.js';
export { ModelMetrics } from './model-metrics.js';
export { planThreads } from './thread-plan.js';
export type { ThreadDemand, ThreadPlan } from './thread-plan.js';
