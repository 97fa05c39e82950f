/** The attribute names on batch and wait spans. */
export const BatchAttributes = {
  BATCHER: 'microbatch.batcher.name',
  BATCH_ID: 'microbatch.batch.id',
  BATCH_SIZE: 'microbatch.batch.size',
  MAX_BATCH_SIZE: 'microbatch.batch.max_size',
  QUEUE_WAIT_MAX_MS: 'microbatch.batch.queue_wait.max_ms',
  QUEUE_WAIT_MEAN_MS: 'microbatch.batch.queue_wait.mean_ms',
  QUEUE_WAIT_MS: 'microbatch.queue_wait_ms',
  OUTCOME: 'microbatch.batch.outcome',
  FAILED: 'microbatch.batch.failed',
  EXECUTION_MS: 'microbatch.batch.execution_ms',
  /** On a web replica's `microbatch.queue` span: the worker batch's global id (`<worker>-<sequence>`). */
  REMOTE_BATCH_ID: 'microbatch.remote_batch.id',
  /** On a web replica's `microbatch.queue` span: `ok`, `cancelled` or the error's code (`QUEUE_FULL`, `HANDLER_ERROR`...). */
  ITEM_OUTCOME: 'microbatch.outcome',
} as const;
