import type { TextGenerationInput } from '@microbatch/inference';
import { Inject, Injectable, type PipeTransform } from '@nestjs/common';
import type { TextCompletionService } from '../../service/text-completion-service.js';
import { parseTextQuery } from '../../endpoints/text-query.js';
import { TEXT_COMPLETION_SERVICE } from './text-completion.constants.js';

/**
 * Checks one request's `text` query parameter before it joins a batch: an invalid one is answered 400 (naming
 * `text`) by `@Batch()`'s interceptor and never reaches the model.
 *
 * @example
 * ```ts
 * complete(@Query('text', TextQueryPipe) inputs: TextGenerationInput[]) {}
 * ```
 */
@Injectable()
export class TextQueryPipe implements PipeTransform<unknown, TextGenerationInput> {
  constructor(@Inject(TEXT_COMPLETION_SERVICE) private readonly service: TextCompletionService) {}

  transform(text: unknown): TextGenerationInput {
    return parseTextQuery(text, this.service.validate);
  }
}
