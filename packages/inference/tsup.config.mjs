import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** @type {import('tsup').Options} */
export default {
  // src/worker.ts is the worker-thread entry the pool starts from dist/worker.js (ESM in either build).
  entry: ['src/index.ts', 'src/worker.ts'],
  format: ['esm', 'cjs'],
  // Declarations come from `tsc -p tsconfig.build.json`, then scripts/cjs-declarations.mjs writes the `.d.cts`
  // twins: TypeScript 7 has no compiler API for tsup's dts step.
  dts: false,
  clean: true,
  sourcemap: true,
  target: 'node20',
  // Error classes keep their names in logs and stack traces (`BatchError`, not esbuild's `_BatchError`).
  keepNames: true,
  // `import.meta.url` locates dist/worker.js; the shim provides it in the CommonJS build.
  shims: true,
  // Model runtimes stay external: they are large, native (onnxruntime-node), and must load only in workers. The
  // engine stays external too; its small, dependency-free helpers (`@microbatch/core/util`) are bundled from
  // source, so the worker bundle needs no other package's build at run time.
  external: ['@huggingface/transformers', 'onnxruntime-node', /^@microbatch\/core$/],
  noExternal: [/^@microbatch\/core\/util$/],
  esbuildOptions(options) {
    options.alias = { '@microbatch/core/util': fileURLToPath(new URL('../core/src/util/index.ts', import.meta.url)) };
  },
  // Both formats are built in one pass, but workers only ever start from the ESM dist/worker.js: the CommonJS copy
  // would ship as a stray file. Paths from this file, not the working directory: tests build from the repo root.
  async onSuccess() {
    const stray = ['./dist/worker.cjs', './dist/worker.cjs.map'].map((file) => new URL(file, import.meta.url));
    await Promise.all(stray.map((file) => rm(file, { force: true })));
  },
};
