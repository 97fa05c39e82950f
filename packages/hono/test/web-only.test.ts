// The Hono adapter runs wherever Hono does (Node, Bun, Deno, edge workers): nothing it loads at run time, its own
// modules and the parts of @microbatch/core it reaches, imports a `node:` module or a Node built-in.
import { readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const WORKSPACE: Readonly<Record<string, string>> = {
  '@microbatch/core': 'packages/core/src/index.ts',
  '@microbatch/core/web': 'packages/core/src/web/index.ts',
};
// Value imports and re-exports only: `import type` and `export type` are erased.
const IMPORT = /^\s*(?:import|export)\s+(?!type\b)(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm;

/** Every module specifier loaded at run time from `entry`, following relative and workspace imports. */
async function runtimeImports(entry: string): Promise<{ files: string[]; external: Set<string> }> {
  const files: string[] = [];
  const external = new Set<string>();
  const queue = [resolve(ROOT, entry)];
  const seen = new Set<string>();
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    files.push(file);
    const source = await readFile(file, 'utf8');
    for (const [, specifier = ''] of source.matchAll(IMPORT)) {
      if (specifier.startsWith('.')) queue.push(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      else if (Object.hasOwn(WORKSPACE, specifier)) queue.push(resolve(ROOT, WORKSPACE[specifier] as string));
      else external.add(specifier);
    }
  }
  return { files, external };
}

describe('@microbatch/hono on Web APIs only', () => {
  it('loads no node: module and no Node built-in, directly or through @microbatch/core', async () => {
    const { files, external } = await runtimeImports('packages/hono/src/index.ts');
    // The walk reached core (so the check covers it), and found Hono's own modules.
    expect(files.some((file) => file.includes('/packages/core/src/'))).toBe(true);
    expect([...external].sort()).toEqual(['hono/streaming']);
    const nodeOnly = [...external].filter(
      (specifier) => specifier.startsWith('node:') || builtinModules.includes(specifier),
    );
    expect(nodeOnly).toEqual([]);
  });

  it('would notice one: the HTTP kit for Node does load node: modules', async () => {
    const { external } = await runtimeImports('packages/core/src/http/index.ts');
    expect([...external].filter((specifier) => specifier.startsWith('node:'))).toContain('node:zlib');
  });
});
