import base from '../core/tsup.config.mjs';

/** @type {import('tsup').Options} */
export default {
  ...base,
  // `import.meta.url` locates the repository's models/ folder (`bundledModelDir`); the shim provides it in CommonJS.
  shims: true,
};
