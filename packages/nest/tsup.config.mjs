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
  // esbuild compiles the legacy decorators but cannot emit decorator metadata; the library does not need it (every
  // constructor parameter names its token with `@Inject()`), so the build reads a tsconfig that does not ask for it.
  tsconfig: 'tsconfig.build.json',
};
