import type { TextGenerationInput } from '@microbatch/inference';
import { type TextCompletionModel, parseTextQuery } from '@microbatch/serving';
import {
  type CallHandler,
  type ExecutionContext,
  Inject,
  Injectable,
  type NestInterceptor,
  type PipeTransform,
} from '@nestjs/common';
import type { Response } from 'express';
import { type Observable, tap } from 'rxjs';

/** The injection token of the app's `TextCompletionModel`. */
export const TEXT_COMPLETION_MODEL = Symbol('TEXT_COMPLETION_MODEL');

/**
 * Checks one request's `text` query parameter before it joins a batch: an invalid one is answered 400 (naming
 * `text`) by `@Batch()`'s interceptor and never reaches the model.
 */
@Injectable()
export class TextQueryPipe implements PipeTransform<unknown, TextGenerationInput> {
  constructor(@Inject(TEXT_COMPLETION_MODEL) private readonly model: TextCompletionModel) {}

  transform(text: unknown): TextGenerationInput {
    return parseTextQuery(text, this.model.validate);
  }
}

/**
 * Sends a successful string result as `text/plain` (Express would say `text/html`, wrong for echoed user text).
 * Unlike `@Header()`, it leaves error responses their JSON content type.
 */
@Injectable()
export class PlainTextInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const res = context.switchToHttp().getResponse<Response>();
    return next.handle().pipe(tap(() => res.type('text/plain')));
  }
}
