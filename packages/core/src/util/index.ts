// `@microbatch/core/util`: the helpers every microbatch package shares, so none keeps its own copy.
export { isAsyncGeneratorFunction } from './async-generator.js';
export { ItemStream } from '../item-stream.js';
export {
  MAX_FINITE,
  checkBoolean,
  checkFunction,
  checkInteger,
  checkNumber,
  checkOneOf,
  checkOptionalFunction,
  checkString,
  fail,
  isObjectLike,
  isPromiseLike,
} from './checks.js';
export { definedEntries, dropUndefined } from './defined.js';
export { describeValue } from './describe-value.js';
export { seededRandom } from './seeded-random.js';
export { isBatcher } from '../batcher-brand.js';
export { checkTracer } from '../tracing.js';
export { BATCHER_BRAND } from '../types.js';
