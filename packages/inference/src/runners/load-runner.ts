// The runner registry: which module loads each task. Kept apart from the runners (which import `runner.ts`), so
// the registry's dynamic imports never form a cycle with them.
import type { WorkerInit } from '../contract/messages.js';
import type { Runner } from './runner.js';

/** Loads the runner a worker was started for; each task's module is imported only when that task is used. */
export async function loadRunner(init: WorkerInit): Promise<Runner> {
  const { spec } = init;
  switch (spec.task) {
    case 'text-generation':
      return spec.scheduling === 'continuous'
        ? (await import('./continuous-generation.js')).loadContinuousGenerationRunner(spec, init)
        : (await import('./text-generation.js')).loadTextGenerationRunner(spec, init);
    case 'feature-extraction':
      return (await import('./transformers-pipelines.js')).loadFeatureExtractionRunner(spec, init);
    case 'text-classification':
      return (await import('./transformers-pipelines.js')).loadTextClassificationRunner(spec, init);
    case 'onnx':
      return (await import('./onnx.js')).loadOnnxRunner(spec, init);
  }
}
