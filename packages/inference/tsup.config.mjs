/** @type {import('tsup').Options} */
export default {
  // src/worker.ts is the worker-thread entry the pool starts from dist/worker.js (ESM in either build; the CJS
  // copy is a by-product of building both entries in one clean pass).
  entry: ['src/index.ts', 'src/worker.ts'],
  format: ['esm', 'cjs'],
  // Declarations come from `tsc -p tsconfig.build.json`: TypeScript 7 has no compiler API for tsup's dts step.
  dts: false,
  clean: true,
  sourcemap: true,
  target: 'node20',
  // `import.meta.url` locates dist/worker.js; the shim provides it in the CommonJS build.
  shims: true,
  // Model runtimes stay external: they are large, native (onnxruntime-node), and must load only in workers.
  external: ['@huggingface/transformers', 'onnxruntime-node', '@microbatch/core'],
};
