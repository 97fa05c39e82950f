import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BatchRegistry } from '@microbatch/nest';
import type { Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { PLATFORMS, startApp } from './nest-helpers/nest-app.js';

const README = fileURLToPath(new URL('../packages/nest/README.md', import.meta.url));
const written: string[] = [];

/** The first ```ts block under `heading` in the README, exactly as written there. */
function codeBlockUnder(heading: string): string {
  const markdown = readFileSync(README, 'utf8');
  const section = markdown.slice(markdown.indexOf(`\n## ${heading}\n`));
  const block = /\n```ts\n([\s\S]*?)\n```\n/.exec(section)?.[1];
  if (block === undefined) throw new Error(`No \`\`\`ts block under "## ${heading}" in ${README}`);
  return block;
}

/** Writes the block next to this test, so that vitest transforms it (decorators included), and imports it. */
async function importBlock(heading: string): Promise<Record<string, Type>> {
  const file = fileURLToPath(
    new URL(
      `./nest-helpers/readme-${heading.replace(/\W+/g, '-').toLowerCase()}-${process.pid}.tmp.ts`,
      import.meta.url,
    ),
  );
  writeFileSync(file, codeBlockUnder(heading));
  written.push(file);
  return (await import(/* @vite-ignore */ file)) as Record<string, Type>;
}

afterAll(() => {
  for (const file of written) rmSync(file, { force: true });
});

describe('packages/nest/README.md', () => {
  it.each(PLATFORMS)('Quick start: the example batches concurrent requests (%s)', async (platform) => {
    const { AppModule } = await importBlock('Quick start');
    const app = await startApp(platform, AppModule!);
    try {
      const prompts = ['a', 'b', 'c', 'd'];
      const responses = await Promise.all(
        prompts.map((prompt) => request(app.getHttpServer()).post('/generate').send({ prompt })),
      );
      responses.forEach((response, index) => {
        expect(response.status).toBe(200);
        expect(response.body).toEqual({ text: `${prompts[index]}, once upon a time` });
      });
      // How the four split depends on arrival times; each batch's size must match the requests that report it.
      for (const response of responses) {
        const members = responses.filter((other) => other.headers['x-batch-id'] === response.headers['x-batch-id']);
        expect(response.headers['x-batch-size']).toBe(String(members.length));
      }
    } finally {
      await app.close();
    }
  });

  it('Calling a batched provider: concurrent one-item calls share one batch', async () => {
    const { SearchModule, SearchService, Embedder } = await importBlock('Calling a batched provider');
    const testing = await Test.createTestingModule({ imports: [SearchModule!] }).compile();
    const context = await testing.init();
    try {
      const search = context.get<unknown, { vectorOf(query: string): Promise<number[]> }>(SearchService!);
      const vectors = await Promise.all(
        ['one', 'two words', 'three more words'].map((query) => search.vectorOf(query)),
      );
      expect(vectors).toEqual([
        [3, 1],
        [9, 2],
        [16, 3],
      ]);
      const stats = context.get(BatchRegistry).batcherOf(context.get(Embedder!), 'embed')?.stats();
      expect([stats?.name, stats?.batchesProcessed, stats?.itemsProcessed]).toEqual(['Embedder.embed', 1, 3]);
    } finally {
      await context.close();
    }
  });
});
