// batch-api/: OpenAI's Files and Batch APIs (`/v1/files`, `/v1/batches`) on spare capacity: the embedded stores on
// `--data-dir` or a broker's shared storage (files, batches, results appended as lines finish), the input file's JSONL checks, the runner that
// feeds lines to the interactive endpoints at the lowest priority while there is room (and resumes after a
// restart), and the HTTP handlers the route table mounts on every framework.
export type { BatchApiOptions } from './batch-api-options.js';
export { BATCH_FAIRNESS_KEY, BATCH_PRIORITY } from './batch-lines.js';
export type { BatchEndpoint, BatchInputError, BatchObject, BatchStatus } from './batch-store.js';
export type { FileObject, FilePurpose } from './file-store.js';
export type { ResultLine } from './batch-results.js';
