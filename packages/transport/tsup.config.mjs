/** @type {import('tsup').Options} */
export default {
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  // Declarations come from `tsc -p tsconfig.build.json`: TypeScript 7 has no compiler API for tsup's dts step.
  dts: false,
  clean: true,
  sourcemap: true,
  target: 'node20',
  // Error classes keep their names in logs and stack traces (`BatchError`, not esbuild's `_BatchError`).
  keepNames: true,
};
