// `microbatch serve`'s Batch API flags (`--data-dir`, `--max-upload-mb`, `--batch-max-in-flight`) as the apps'
// `batchApi` option, the same for text generation and embeddings.
import type { BatchApiOptions } from '@microbatch/serving';
import { dropUndefined } from '@microbatch/core/util';
import type { ServeFlags } from './program.js';

/**
 * The app's `batchApi` option from the flags (none without `--data-dir`).
 *
 * @example
 * ```ts
 * startTextCompletionApp(service, where, { ...batchApiOf(flags) });
 * ```
 */
export function batchApiOf(flags: ServeFlags): { readonly batchApi?: BatchApiOptions } {
  if (flags.dataDir === undefined) return {};
  const maxFileBytes = flags.maxUploadMb === undefined ? undefined : Math.floor(flags.maxUploadMb * 1024 * 1024);
  return {
    batchApi: { dataDir: flags.dataDir, ...dropUndefined({ maxFileBytes, maxInFlight: flags.batchMaxInFlight }) },
  };
}
