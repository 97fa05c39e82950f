#!/usr/bin/env node
// Run by each package's build after `tsc -p tsconfig.build.json`: writes a `.d.cts` twin beside every `.d.ts` in
// dist/, so `require` resolves to CommonJS declarations (`exports["."].require.types`) and `import` to ESM ones.
// One `types` file for both conditions is what `attw` calls "Masquerading as ESM": a CommonJS TypeScript project on
// `module: node16` then gets TS1479 on every import. TypeScript names a declaration's format after its extension
// only, so the twin gets `.d.cts` and its relative imports `.cjs` (which resolve to the sibling `.d.cts` files).
// TypeScript 7 has no compiler API (tsup's `dts` needs one), so copying is how the second set is made.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const RELATIVE_JS = /((?:from|import)\s*\(?\s*)(['"])(\.{1,2}\/[^'"\n]*?)\.js\2/g;

/**
 * The CommonJS twin of an ESM declaration file's text: relative `.js` specifiers become `.cjs`.
 *
 * @example
 * ```js
 * toCjsDeclaration("export { a } from './a.js';"); // "export { a } from './a.cjs';"
 * ```
 */
export function toCjsDeclaration(text) {
  return text.replace(RELATIVE_JS, (_match, head, quote, path) => `${head}${quote}${path}.cjs${quote}`);
}

async function* declarationFiles(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* declarationFiles(path);
    else if (entry.name.endsWith('.d.ts')) yield path;
  }
}

async function main() {
  const dist = resolve(process.argv[2] ?? 'dist');
  let count = 0;
  for await (const file of declarationFiles(dist)) {
    const text = await readFile(file, 'utf8');
    await writeFile(file.replace(/\.d\.ts$/, '.d.cts'), toCjsDeclaration(text));
    count += 1;
  }
  if (count === 0) throw new Error(`No .d.ts files under ${dist}: run \`tsc -p tsconfig.build.json\` first`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error) => {
    console.error(`cjs-declarations: ${error.message}`);
    process.exit(1);
  });
}
