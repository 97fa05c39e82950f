// The Files and Batch APIs over HTTP: the rows of the route table (`/v1/files…`, `/v1/batches…`, paths with
// `{param}` segments) and their handlers, which read the raw Node request themselves (the upload's multipart body
// streamed to storage, the JSON of `POST /v1/batches`) and answer in OpenAI's shapes; errors in OpenAI's shape too.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { BatchError } from '@microbatch/core';
import { type HttpErrorOptions, lingerAfterRefusal, readJsonBody, writeJson } from '@microbatch/core/http';
import { writeOpenAiError } from '../openai/openai-error.js';
import type { RawHandler } from '../app/route-table.js';
import { pathParams } from '../app/route-table.js';
import type { BatchApi } from './batch-api.js';
import { BATCH_ENDPOINTS, type BatchEndpoint, ENDED, type StoredBatch } from './batch-store.js';
import type { StoredFile } from './file-store.js';
import { receiveUpload } from './multipart-upload.js';

/**
 * The Files and Batch APIs' rows, appended to the text-completion app's table.
 *
 * @example
 * ```ts
 * BATCH_API_TABLE.map((row) => `${row.method} ${row.path}`);
 * ```
 */
export const BATCH_API_TABLE = [
  { method: 'POST', path: '/v1/files', handler: 'uploadFile' },
  { method: 'GET', path: '/v1/files', handler: 'listFiles' },
  { method: 'GET', path: '/v1/files/{file_id}', handler: 'getFile' },
  { method: 'DELETE', path: '/v1/files/{file_id}', handler: 'deleteFile' },
  { method: 'GET', path: '/v1/files/{file_id}/content', handler: 'fileContent' },
  { method: 'POST', path: '/v1/batches', handler: 'createBatch' },
  { method: 'GET', path: '/v1/batches', handler: 'listBatches' },
  { method: 'GET', path: '/v1/batches/{batch_id}', handler: 'getBatch' },
  { method: 'POST', path: '/v1/batches/{batch_id}/cancel', handler: 'cancelBatch' },
] as const;

type BatchApiHandlerName = (typeof BATCH_API_TABLE)[number]['handler'];

/** The most characters of a client's id quoted back in an error. */
const QUOTED_ID_CHARS = 64;
const quote = (id: string): string => (id.length > QUOTED_ID_CHARS ? `${id.slice(0, QUOTED_ID_CHARS)}...` : id);

const invalid = (message: string, field: string): BatchError<'INVALID_INPUT'> =>
  new BatchError('INVALID_INPUT', message, { details: { field } });

/**
 * The handlers of {@link BATCH_API_TABLE}: over `api` when the Batch API is on, else each answers 404 saying how
 * to turn it on.
 *
 * @example
 * ```ts
 * const handlers = batchApiHandlers(api, { exposeDetails: false });
 * ```
 */
export function batchApiHandlers(
  api: BatchApi | undefined,
  errors: HttpErrorOptions,
): Record<BatchApiHandlerName, RawHandler> {
  const guard =
    (
      pattern: string,
      answer: (
        api: BatchApi,
        req: IncomingMessage,
        res: ServerResponse,
        params: Record<string, string>,
      ) => Promise<void>,
    ): RawHandler =>
    async (req, res) => {
      try {
        if (api === undefined) {
          throw new BatchError(
            'NOT_FOUND',
            'The Files and Batch APIs are off on this server (start it with --data-dir, or --queue with --batch-api)',
          );
        }
        await api.ready;
        await answer(api, req, res, pathParams(pattern, req.url));
      } catch (error) {
        // A refusal before the body was read whole: let Node discard the rest, so the client still gets its answer.
        if (req.method === 'POST' && !req.complete) {
          lingerAfterRefusal(res, error);
          req.resume();
        }
        writeOpenAiError(res, error, errors);
      }
    };
  return {
    uploadFile: guard('/v1/files', uploadFile),
    listFiles: guard('/v1/files', listFiles),
    getFile: guard('/v1/files/{file_id}', async (a, req, res, { file_id: id = '' }) => {
      writeJson(res, 200, (await fileOf(a, id, req)).file);
    }),
    deleteFile: guard('/v1/files/{file_id}', async (a, req, res, { file_id: id = '' }) => {
      await fileOf(a, id, req);
      await a.files.delete(id);
      writeJson(res, 200, { id, object: 'file', deleted: true });
    }),
    fileContent: guard('/v1/files/{file_id}/content', async (a, req, res, { file_id: id = '' }) => {
      const stored = await fileOf(a, id, req);
      const content = await a.files.openContent(id);
      if (content === undefined) throw new BatchError('NOT_FOUND', `No such File object: ${quote(id)}`);
      res.statusCode = 200;
      res.setHeader('Content-Type', 'application/jsonl');
      res.setHeader('Content-Length', String(stored.file.bytes));
      await pipeline(content, res);
    }),
    createBatch: guard('/v1/batches', createBatch),
    listBatches: guard('/v1/batches', async (a, req, res) => {
      const { limit, after } = pageQuery(req.url, 100, 20);
      writeJson(
        res,
        200,
        page(
          (await a.batches.list()).filter((s) => s.owner === a.owner(req)).map((s) => s.batch),
          after,
          limit,
        ),
      );
    }),
    getBatch: guard('/v1/batches/{batch_id}', async (a, req, res, { batch_id: id = '' }) => {
      writeJson(res, 200, (await batchOf(a, id, req)).batch);
    }),
    cancelBatch: guard('/v1/batches/{batch_id}/cancel', async (a, req, res, { batch_id: id = '' }) => {
      const stored = await batchOf(a, id, req);
      if (ENDED.has(stored.batch.status)) {
        throw new BatchError('INVALID_INPUT', `Cannot cancel a batch with status ${stored.batch.status}`);
      }
      const cancelling = stored.batch.status === 'cancelling' ? stored : await a.runner.cancel(stored);
      writeJson(res, 200, cancelling.batch);
    }),
  };
}

async function uploadFile(api: BatchApi, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { maxFiles } = api.options;
  if ((await api.files.count()) >= maxFiles) {
    throw invalid(`The server keeps at most ${maxFiles} files: delete some before uploading`, 'file');
  }
  const { pending, filename, fields } = await receiveUpload(req, api.files, api.options.maxFileBytes);
  if (pending === undefined) throw invalid('The form has no `file`', 'file');
  const { purpose } = fields;
  if (purpose !== 'batch') {
    await api.files.discard(pending);
    throw invalid(
      `\`purpose\` must be "batch", got ${purpose === undefined ? 'none' : JSON.stringify(quote(purpose))}`,
      'purpose',
    );
  }
  const stored = await api.files.commit(pending, { filename, purpose, owner: api.owner(req) });
  writeJson(res, 200, stored.file);
}

async function listFiles(api: BatchApi, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
  const { limit, after } = pageQuery(req.url, 10_000, 10_000);
  const purpose = query.get('purpose');
  const order = query.get('order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw invalid('`order` must be "asc" or "desc"', 'order');
  const owner = api.owner(req);
  let files = (await api.files.list()).filter((s) => s.owner === owner).map((s) => s.file);
  if (purpose !== null) files = files.filter((file) => file.purpose === purpose);
  if (order === 'asc') files.reverse();
  writeJson(res, 200, page(files, after, limit));
}

async function createBatch(api: BatchApi, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readJsonBody(req);
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalid('The body must be a JSON object', 'body');
  const fields = body as Record<string, unknown>;
  const known = new Set(['input_file_id', 'endpoint', 'completion_window', 'metadata']);
  for (const key of Object.keys(fields)) {
    if (!known.has(key)) throw invalid(`Unknown field \`${quote(key)}\``, key);
  }
  const { input_file_id: inputFileId, endpoint, completion_window: window, metadata } = fields;
  if (typeof inputFileId !== 'string') throw invalid('`input_file_id` must be a string', 'input_file_id');
  if (!BATCH_ENDPOINTS.includes(endpoint as BatchEndpoint)) {
    throw invalid(`\`endpoint\` must be one of ${BATCH_ENDPOINTS.join(', ')}`, 'endpoint');
  }
  if (api.endpoints[endpoint as BatchEndpoint] === undefined) {
    throw invalid(`This server does not serve ${String(endpoint)}`, 'endpoint');
  }
  if (window !== '24h') throw invalid('`completion_window` must be "24h"', 'completion_window');
  const input = await api.files.get(inputFileId);
  if (input === undefined || input.owner !== api.owner(req)) {
    throw invalid(`No such File object: ${quote(inputFileId)}`, 'input_file_id');
  }
  if (input.file.purpose !== 'batch') {
    throw invalid(`File ${input.file.id} has purpose "${input.file.purpose}", not "batch"`, 'input_file_id');
  }
  const active = (await api.batches.list()).filter((batch) => !ENDED.has(batch.batch.status)).length;
  if (active >= api.options.maxActiveBatches) {
    throw new BatchError('QUEUE_FULL', `${active} batches are not done yet; retry later`, { retryAfterSeconds: 60 });
  }
  const stored = await api.batches.create({
    endpoint: endpoint as BatchEndpoint,
    inputFileId,
    metadata: checkMetadata(metadata),
    owner: api.owner(req),
    windowMs: 24 * 60 * 60 * 1000,
  });
  api.runner.start(stored.batch.id);
  writeJson(res, 200, stored.batch);
}

/** OpenAI's metadata: at most 16 string pairs, keys up to 64 characters, values up to 512. */
function checkMetadata(metadata: unknown): Readonly<Record<string, string>> | null {
  if (metadata === undefined || metadata === null) return null;
  if (typeof metadata !== 'object' || Array.isArray(metadata))
    throw invalid('`metadata` must be an object', 'metadata');
  const entries = Object.entries(metadata);
  if (entries.length > 16) throw invalid('`metadata` has more than 16 keys', 'metadata');
  for (const [key, value] of entries) {
    if (key.length > 64 || typeof value !== 'string' || value.length > 512) {
      throw invalid('`metadata` keys must be at most 64 characters and values strings of at most 512', 'metadata');
    }
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

// Another principal's file or batch is answered as one that does not exist: its id tells nothing of it.
async function fileOf(api: BatchApi, id: string, req: IncomingMessage): Promise<StoredFile> {
  const stored = await api.files.get(id);
  if (stored === undefined || stored.owner !== api.owner(req))
    throw new BatchError('NOT_FOUND', `No such File object: ${quote(id)}`);
  return stored;
}

async function batchOf(api: BatchApi, id: string, req: IncomingMessage): Promise<StoredBatch> {
  const stored = await api.batches.get(id);
  if (stored === undefined || stored.owner !== api.owner(req))
    throw new BatchError('NOT_FOUND', `No such Batch object: ${quote(id)}`);
  return stored;
}

/** `limit` (1 to `max`) and `after` of a list's query. */
function pageQuery(url: string | undefined, max: number, fallback: number): { limit: number; after: string | null } {
  const query = new URLSearchParams((url ?? '').split('?')[1] ?? '');
  const text = query.get('limit');
  const limit = text === null ? fallback : Number(text);
  if (!Number.isInteger(limit) || limit < 1 || limit > max)
    throw invalid(`\`limit\` must be an integer from 1 to ${max}`, 'limit');
  return { limit, after: query.get('after') };
}

/** OpenAI's cursor page: the items after `after` (none: from the first), at most `limit`. */
function page<T extends { readonly id: string }>(items: readonly T[], after: string | null, limit: number) {
  const start = after === null ? 0 : items.findIndex((item) => item.id === after) + 1;
  const data = after !== null && start === 0 ? [] : items.slice(start, start + limit);
  return {
    object: 'list',
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: start + data.length < items.length && data.length > 0,
  };
}
