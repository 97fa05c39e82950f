import type { ServerResponse } from 'node:http';
import type { DecodeBatch } from '@microbatch/inference';
import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import { type Observable, map } from 'rxjs';
import { decodeBatchHeaders } from '../../endpoints/decode-batch-headers.js';

/**
 * A batched route's answer with the decode-loop step that batched it (continuous scheduling), for
 * {@link DecodeBatchInterceptor}.
 *
 * @example
 * ```ts
 * const answer: DecodeBatchAnswer = { answer: 'Once upon a time, there was', batch: output.batch };
 * ```
 */
export interface DecodeBatchAnswer {
  readonly answer: unknown;
  readonly batch: DecodeBatch | undefined;
}

function isDecodeBatchAnswer(value: unknown): value is DecodeBatchAnswer {
  return typeof value === 'object' && value !== null && 'answer' in value && 'batch' in value;
}

/**
 * Answers with a {@link DecodeBatchAnswer}'s `answer`, after replacing the `X-Batch-Size` / `X-Batch-Id` headers
 * that `@Batch()` set at dispatch (the batcher's batch) with the decode loop's (see `decodeBatchHeaders`).
 *
 * @example
 * ```ts
 * @Get() @UseInterceptors(DecodeBatchInterceptor) @Batch() complete(...) { return outputs.map(...); }
 * ```
 */
@Injectable()
export class DecodeBatchInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const res = context.switchToHttp().getResponse<ServerResponse>();
    return next.handle().pipe(
      map((value: unknown) => {
        if (!isDecodeBatchAnswer(value)) return value;
        if (!res.headersSent) {
          for (const [name, header] of Object.entries(decodeBatchHeaders([value]))) res.setHeader(name, header);
        }
        return value.answer;
      }),
    );
  }
}
