export { instrumentDecodeLoop } from './decode-loop.js';
export type { DecodeLoopActivity, DecodeLoopMetricsSource } from './decode-loop.js';
export { createHealth } from './health.js';
export type { Health, HealthBody, HealthOptions } from './health.js';
export { instrumentBatcher } from './instrument.js';
export type { Instrumentation } from './instrument.js';
export { metricsHandler, scrapeMetrics } from './metrics-endpoint.js';
export type { MetricsResult } from './metrics-endpoint.js';
export { toNodeHandler } from './node-handler.js';
export type { HttpResult, NodeHandler } from './node-handler.js';
export { DEFAULT_BUCKETS } from './options.js';
export type { AnyRegistry, InstrumentOptions, MetricBuckets } from './options.js';
export { REASON_LABELS } from './reasons.js';
export { GENERATION_METRIC_NAMES, createGenerationMetrics } from './generation-metrics.js';
export type {
  GenerationMetrics,
  GenerationMetricsOptions,
  SequenceTimer,
  SequenceUsage,
} from './generation-metrics.js';
export { dashboardHandler } from './dashboard/handler.js';
export type { DashboardData, DashboardHandler, DashboardOptions } from './dashboard/handler.js';
export type { DashboardPoint, Percentiles } from './dashboard/sampler.js';
