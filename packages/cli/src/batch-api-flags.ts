// `microbatch serve`'s Batch API flags (`--data-dir`, or `--batch-api` with `--queue`; `--max-upload-mb`,
// `--batch-max-in-flight`) as the apps' `batchApi` option, the same for text generation and embeddings.
import type { BatchApiOptions } from '@microbatch/serving';
import { dropUndefined } from '@microbatch/core/util';
import type { ServeFlags } from './program.js';

/**
 * The app's `batchApi` option from the flags: on `--data-dir`, or on `storage` (the broker's, opened for
 * `--batch-api`); none without either.
 *
 * @example
 * ```ts
 * startTextCompletionApp(service, where, { ...batchApiOf(flags) });
 * ```
 */
export function batchApiOf(
  flags: ServeFlags,
  storage?: NonNullable<BatchApiOptions['storage']>,
): { readonly batchApi?: BatchApiOptions } {
  const where =
    storage !== undefined ? { storage } : flags.dataDir !== undefined ? { dataDir: flags.dataDir } : undefined;
  if (where === undefined) return {};
  const maxFileBytes = flags.maxUploadMb === undefined ? undefined : Math.floor(flags.maxUploadMb * 1024 * 1024);
  return {
    batchApi: { ...where, ...dropUndefined({ maxFileBytes, maxInFlight: flags.batchMaxInFlight }) },
  };
}
