// The items and results of the raw ONNX runner: tensors as plain data, so they cross `postMessage` as they are.

/**
 * A typed array onnxruntime accepts or returns.
 *
 * @example
 * ```ts
 * const ids: OnnxTypedArray = BigInt64Array.from([1n, 80n]);
 * ```
 */
export type OnnxTypedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

/**
 * A tensor as plain data: what the ONNX runner returns per output, and one form an input value may take.
 *
 * @example
 * ```ts
 * const { dims, data } = output.embeddings; // dims [384], data Float32Array(384)
 * ```
 */
export interface OnnxTensorData {
  /** The onnxruntime element type (`'float32'`, `'int64'`, ...). */
  readonly type: string;
  /** The dimensions, without the batch axis for per-item values. */
  readonly dims: readonly number[];
  readonly data: OnnxTypedArray | readonly string[];
}

/**
 * One named input of one item: a scalar, a (nested) array, a typed array, or `{ data, dims }` (no batch axis).
 *
 * @example
 * ```ts
 * const value: OnnxInputValue = { data: [0.5, 1, 2, 3], dims: [2, 2] };
 * ```
 */
export type OnnxInputValue =
  | number
  | bigint
  | boolean
  | ArrayLike<number | bigint | boolean>
  | ReadonlyArray<ArrayLike<number | bigint | boolean>>
  | { readonly data: ArrayLike<number | bigint>; readonly dims: readonly number[] };

/**
 * One item for the ONNX runner: its value for each model input, without the batch axis. Variable-length
 * sequences are padded per batch, and `attention_mask` is generated when the model has one and it is left out.
 *
 * @example
 * ```ts
 * const item: OnnxInput = { input_ids: [1, 80, 147] };
 * ```
 */
export type OnnxInput = Readonly<Record<string, OnnxInputValue>>;

/**
 * One item's result from the ONNX runner: each requested output, without the batch axis or padding.
 *
 * @example
 * ```ts
 * const { embeddings } = await embed({ input_ids: [1, 80, 147] });
 * ```
 */
export type OnnxOutput = Readonly<Record<string, OnnxTensorData>>;
