// `POST /v1/files`'s body: a multipart form (`file`, `purpose`) parsed by busboy as it arrives, the file's bytes
// streamed to the storage as a blob and never held whole. Fields may come in either order (the official clients
// send `file` first), so the purpose is checked once the form has ended.
import type { IncomingMessage } from 'node:http';
import { BatchError } from '@microbatch/core';
import busboy from 'busboy';
import type { FileStore, PendingFile } from './file-store.js';

/** What an upload form carried. */
export interface ReceivedUpload {
  readonly pending: PendingFile | undefined;
  readonly filename: string;
  readonly fields: Readonly<Record<string, string>>;
}

/**
 * Reads `req`'s multipart form: the `file` part to `files` (at most `maxBytes`; `ITEM_TOO_LARGE` past it, the part
 * removed), the other fields (a few, 1 KiB each) as text. A body that is not multipart is `UNSUPPORTED_MEDIA_TYPE`.
 *
 * @example
 * ```ts
 * const { pending, fields } = await receiveUpload(req, files, 100 * 1024 * 1024);
 * ```
 */
export function receiveUpload(req: IncomingMessage, files: FileStore, maxBytes: number): Promise<ReceivedUpload> {
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: req.headers,
      // One byte more than the bound: the store sees it and refuses the file; busboy discards the rest.
      limits: { files: 1, fields: 8, fieldSize: 1024, parts: 16, fileSize: maxBytes + 1 },
    });
  } catch {
    return Promise.reject(
      new BatchError('UNSUPPORTED_MEDIA_TYPE', 'The body must be multipart/form-data with `file` and `purpose`'),
    );
  }
  return new Promise<ReceivedUpload>((resolve, reject) => {
    const fields: Record<string, string> = {};
    let filename = 'upload.jsonl';
    let receiving: Promise<PendingFile> | undefined;
    let failed: unknown;
    parser.on('file', (name, stream, info) => {
      if (name !== 'file' || receiving !== undefined) {
        stream.resume();
        return;
      }
      filename = info.filename ?? filename;
      receiving = files.receive(stream, maxBytes);
      receiving.catch(() => undefined);
    });
    parser.on('field', (name, value) => {
      fields[name] = value;
    });
    parser.on('error', (error: unknown) => {
      failed = error;
      req.unpipe(parser);
      req.resume();
      settle();
    });
    parser.on('close', () => settle());
    let settled = false;
    const settle = (): void => {
      if (settled) return;
      settled = true;
      const pending = receiving ?? Promise.resolve(undefined);
      pending.then(
        async (part) => {
          if (failed !== undefined) {
            if (part !== undefined) await files.discard(part);
            reject(new BatchError('INVALID_INPUT', 'The multipart body is malformed', { cause: failed }));
            return;
          }
          resolve({ pending: part, filename, fields });
        },
        (error: unknown) => reject(error),
      );
    };
    req.on('aborted', () => {
      failed ??= new Error('aborted');
    });
    req.pipe(parser);
  });
}
