import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFile(new URL(`../${path}`, import.meta.url), 'utf8');

/** The first ```ts block of a markdown file: the example its package's README test runs exactly as written. */
async function firstTsBlock(path: string): Promise<string> {
  const block = /```ts\n[\s\S]*?```/.exec(await read(path))?.[0];
  if (block === undefined) throw new Error(`${path} has no \`\`\`ts block`);
  return block;
}

describe('README.md', () => {
  it.each(['express', 'koa', 'fastify', 'hono', 'nest'])(
    'shows the %s example that packages/%s/README.md runs in its test',
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
});
