// The weight formats (dtypes) a transformers.js model folder may hold, named as transformers.js names them, and
// the order `dtype: 'auto'` tries them in on a CPU. Plain data: the spec checks it on the main thread, the worker
// resolves it against the folder's files (`runners/model-files.ts`).

/**
 * Every explicit dtype, with the suffix transformers.js adds to a graph's file name for it (`model_q4.onnx`); its
 * `DEFAULT_DTYPE_SUFFIX_MAPPING`, less the 2- and 1-bit formats no exporter ships for these tasks.
 *
 * @example
 * ```ts
 * MODEL_DTYPE_SUFFIXES.q8; // '_quantized': onnx/model_quantized.onnx
 * ```
 */
export const MODEL_DTYPE_SUFFIXES = {
  fp32: '',
  fp16: '_fp16',
  q8: '_quantized',
  int8: '_int8',
  uint8: '_uint8',
  q4: '_q4',
  q4f16: '_q4f16',
  bnb4: '_bnb4',
} as const;

/**
 * A weight format of a model folder's ONNX graph, as transformers.js names it.
 *
 * @example
 * ```ts
 * const dtype: ModelDtype = 'q4'; // onnx/model_q4.onnx (MatMulNBits)
 * ```
 */
export type ModelDtype = keyof typeof MODEL_DTYPE_SUFFIXES;

/**
 * What `dtype: 'auto'` loads on a CPU: the first of these the folder has. 8-bit first (MatMulInteger runs fastest on
 * CPUs and keeps quality close to fp32), then 4-bit (smallest, slower kernels), then fp32, and fp16 last: onnxruntime's
 * CPU provider runs most fp16 operators by casting to fp32 and back, so an fp16 graph is the slowest on a CPU.
 *
 * @example
 * ```ts
 * AUTO_DTYPE_ORDER[0]; // 'q8'
 * ```
 */
export const AUTO_DTYPE_ORDER: readonly ModelDtype[] = ['q8', 'int8', 'uint8', 'q4', 'bnb4', 'fp32', 'q4f16', 'fp16'];

/**
 * The values a runner's `dtype` takes: `'auto'` or an explicit {@link ModelDtype}.
 *
 * @example
 * ```ts
 * DTYPE_CHOICES.includes('q4'); // true
 * ```
 */
export const DTYPE_CHOICES: readonly ('auto' | ModelDtype)[] = ['auto', ...AUTO_DTYPE_ORDER];
