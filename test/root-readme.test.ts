// The root README and the docs/ guides, kept true: the framework examples are the ones their package READMEs run,
// the set-up commands are the ones CI runs, every `@microbatch/*` name a TypeScript block imports exists; and in
// every markdown file a reader follows (ARCHITECTURE, BENCHMARKS, the examples' and packages' READMEs too), every
// relative link leads somewhere and every `microbatch serve|worker` command line shown parses with the CLI's flags.
import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createProgram } from '../packages/cli/src/program.js';
import { brokenLinks, microbatchCommands, packageImports } from './helpers/markdown.js';

const path = (file: string) => fileURLToPath(new URL(`../${file}`, import.meta.url));
const read = (file: string) => readFile(path(file), 'utf8');

/** The front page and every guide: what the import check reads (their imports resolve from `test/`). */
const DOCS = [
  'README.md',
  ...readdirSync(path('docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** Every markdown file a reader follows links through: what the link and command checks read. */
const MARKDOWN = [
  ...DOCS,
  'ARCHITECTURE.md',
  'BENCHMARKS.md',
  'examples/README.md',
  ...readdirSync(path('packages'))
    .map((name) => `packages/${name}/README.md`)
    .filter((file) => existsSync(path(file))),
];

/** The first ```ts block of a markdown file: the example its package's README test runs exactly as written. */
async function firstTsBlock(file: string): Promise<string> {
  const block = /```ts\n[\s\S]*?```/.exec(await read(file))?.[0];
  if (block === undefined) throw new Error(`${file} has no \`\`\`ts block`);
  return block;
}

/**
 * Parses one command line with the CLI's own program, running nothing: resolves with the command it reached and
 * its flags, or rejects with commander's error (an unknown flag, a bad value, a flag with no effect in that mode).
 */
async function parseCommand(args: readonly string[]): Promise<{ command: string; flags: object }> {
  let parsed: { command: string; flags: object } | undefined;
  const program = createProgram(
    async (flags) => void (parsed = { command: 'serve', flags }),
    async (flags) => void (parsed = { command: 'worker', flags }),
  );
  // Subcommands copy these settings only when created, so each one gets them here: throw instead of exiting.
  for (const command of [program, ...program.commands]) {
    command.exitOverride().configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
  }
  await program.parseAsync([...args], { from: 'user' });
  if (parsed === undefined) throw new Error(`\`microbatch ${args.join(' ')}\` reached no command`);
  return parsed;
}

describe('README.md', () => {
  it.each(['express', 'koa', 'fastify', 'hono', 'nest'])(
    'shows the %s example that its package README runs in its test',
    async (name) => {
      expect(await read('README.md')).toContain(await firstTsBlock(`packages/${name}/README.md`));
    },
  );

  it('names the two set-up commands that .ci/run and package.json implement', async () => {
    const [readme, ci, manifest] = await Promise.all([read('README.md'), read('.ci/run'), read('package.json')]);
    expect(readme).toContain('npm i -g pnpm@12.21.0 && pnpm install && pnpm start');
    expect(readme).toContain('\npnpm test ');
    expect(ci).toContain('\npnpm test\n');
    const { scripts } = JSON.parse(manifest) as { scripts: Record<string, string> };
    expect(Object.keys(scripts)).toEqual(expect.arrayContaining(['start', 'test']));
  });

  it('links every guide in docs/', async () => {
    const readme = await read('README.md');
    for (const guide of DOCS.slice(1)) expect(readme).toContain(`](${guide})`);
  });
});

describe.each(DOCS)('%s', (file) => {
  it('imports only names its @microbatch packages export', async () => {
    for (const { from, names } of packageImports(await read(file))) {
      const exports = Object.keys((await import(from)) as object);
      expect({ from, missing: names.filter((name) => !exports.includes(name)) }).toEqual({ from, missing: [] });
    }
  });
});

describe.each(MARKDOWN)('%s', (file) => {
  it('has no relative link to a missing file or heading', async () => {
    expect(await brokenLinks(path(file), await read(file), (target) => readFile(target, 'utf8'))).toEqual([]);
  });

  it('shows only microbatch serve|worker command lines that the CLI accepts', async () => {
    for (const args of microbatchCommands(await read(file))) {
      // A refusal shows as the command line and commander's message, rather than the message alone.
      const parsed = await parseCommand(args).catch((error: Error) => `microbatch ${args.join(' ')}: ${error.message}`);
      expect(parsed).toMatchObject({ command: args[0] });
    }
  });
});

describe('the checks above can fail', () => {
  it('finds what they check in the front page and the guides', async () => {
    const texts = await Promise.all(DOCS.map(read));
    // The README alone shows 5 framework imports and 4 CLI command lines; a parser that finds none passes nothing.
    expect(texts.flatMap(packageImports).length).toBeGreaterThanOrEqual(5);
    expect((await Promise.all(MARKDOWN.map(read))).flatMap(microbatchCommands).length).toBeGreaterThanOrEqual(4);
  });

  it('reports a missing file, a missing heading and a heading of the wrong file', async () => {
    const markdown = [
      '# Title',
      '[ok](#title) [same file](#nowhere) [file](docs/no-such-guide.md)',
      '[ok](docs/scale-out.md#what-fails-and-what-happens) [heading](docs/scale-out.md#title)',
      '`[code](not-a-link.md)`',
    ].join('\n');
    expect(await brokenLinks(path('README.md'), markdown, (target) => readFile(target, 'utf8'))).toEqual([
      '#nowhere',
      'docs/no-such-guide.md',
      'docs/scale-out.md#title',
    ]);
  });

  it('refuses an unknown flag, and a flag with no effect in the mode chosen', async () => {
    await expect(parseCommand(['serve', '--model', 'm', '--max-sequence', '8'])).rejects.toThrow(/unknown option/);
    await expect(
      parseCommand(['serve', '--queue', 'redis://127.0.0.1:6379', '--model', 'm', '--workers', '2']),
    ).rejects.toThrow(/--workers has no effect here/);
    await expect(parseCommand(['worker', '--model', 'm'])).rejects.toThrow(/--queue/);
  });

  it('flags an import of a name its package does not export', async () => {
    const [imported] = packageImports("```ts\nimport { createBatcher, noSuchName } from '@microbatch/core';\n```\n");
    expect(imported).toEqual({ from: '@microbatch/core', names: ['createBatcher', 'noSuchName'] });
    const exports = Object.keys(await import('@microbatch/core'));
    expect(exports).toContain('createBatcher');
    expect(exports).not.toContain('noSuchName');
  });
});
