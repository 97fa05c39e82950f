import { instrumentBatcher, instrumentDecodeLoop } from '@microbatch/prometheus';
import type { AnyRegistry } from '@microbatch/prometheus';
import type { TextCompletionService } from './text-completion-service.js';

/**
 * Records a text-completion service in `registry`, as every app serves it at `/metrics`: its batchers (queue wait,
 * execution, refusals), and under continuous scheduling its decode loops' rows per step (`microbatch_decode_rows`),
 * the batching that runs there; the batchers' batch sizes, single requests by construction, are then left out.
 *
 * @example
 * ```ts
 * const registry = new Registry();
 * instrumentTextCompletionService(model, registry);
 * ```
 */
export function instrumentTextCompletionService(service: TextCompletionService, registry: AnyRegistry): void {
  const { decodeLoop } = service;
  for (const batcher of service.batchers) {
    instrumentBatcher(batcher, { registry, batchSizes: decodeLoop === undefined });
  }
  if (decodeLoop !== undefined) instrumentDecodeLoop(decodeLoop, { registry });
}
