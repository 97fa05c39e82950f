// The dual-package hazard: an app whose dependencies load @microbatch/core once by `import` (dist/index.js) and once
// by `require` (dist/index.cjs) holds two copies of it in one process. Errors and stream markers made by one copy
// must mean the same to the other: a QUEUE_FULL is a 503 whichever copy maps it, END ends a stream whichever copy
// runs it. This test loads both BUILDS (run `pnpm build` first; `pnpm install` does) in this one process.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import type * as HttpModule from '../src/http/index.js';
import type * as CoreModule from '../src/index.js';

type Core = typeof CoreModule;
type Http = typeof HttpModule;

const dist = (file: string) => fileURLToPath(new URL(`../dist/${file}`, import.meta.url));
const require = createRequire(import.meta.url);

interface Copy {
  readonly name: string;
  readonly core: Core;
  readonly http: Http;
}

let esm: Copy;
let cjs: Copy;

beforeAll(async () => {
  for (const file of ['index.js', 'index.cjs', 'http/index.js', 'http/index.cjs']) {
    if (!existsSync(dist(file))) throw new Error(`packages/core/dist/${file} is missing: run \`pnpm build\` first`);
  }
  esm = {
    name: 'ESM',
    core: (await import(/* @vite-ignore */ pathToFileURL(dist('index.js')).href)) as Core,
    http: (await import(/* @vite-ignore */ pathToFileURL(dist('http/index.js')).href)) as Http,
  };
  cjs = { name: 'CJS', core: require(dist('index.cjs')) as Core, http: require(dist('http/index.cjs')) as Http };
});

/** A batcher of `from` whose queue holds one item behind one running batch; the third call is refused. */
async function queueFullFrom(from: Copy): Promise<unknown> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const batcher = from.core.createBatcher(
    async (inputs: number[]) => {
      await gate;
      return inputs;
    },
    { maxBatchSize: 1, maxQueueSize: 1 },
  );
  const running = batcher(1);
  // Let the first call be dispatched (work-conserving: at the end of the tick it arrived in) before queueing.
  await new Promise((resolve) => setTimeout(resolve, 0));
  const queued = batcher(2);
  const refused = await batcher(3).then(
    () => new Error('the third call was accepted'),
    (error: unknown) => error,
  );
  release();
  await Promise.all([running, queued]);
  await batcher.close();
  return refused;
}

describe('two copies of core in one process (import + require)', () => {
  it('are really two copies', () => {
    expect(esm.core.BatchError).not.toBe(cjs.core.BatchError);
    expect(esm.http.toHttpError).not.toBe(cjs.http.toHttpError);
  });

  for (const [fromName, toName] of [
    ['ESM', 'CJS'],
    ['CJS', 'ESM'],
  ] as const) {
    const pick = (name: string) => (name === 'ESM' ? esm : cjs);

    it(`a QUEUE_FULL refused by the ${fromName} copy is a 503 QUEUE_FULL for the ${toName} copy`, async () => {
      const from = pick(fromName);
      const to = pick(toName);
      const refused = await queueFullFrom(from);
      expect(from.core.isBatchError(refused, 'QUEUE_FULL')).toBe(true);
      expect(to.core.isBatchError(refused, 'QUEUE_FULL')).toBe(true);
      expect(refused instanceof to.core.BatchError).toBe(true);
      const answer = to.http.toHttpError(refused);
      expect(answer.status).toBe(503);
      expect(answer.body.error.code).toBe('QUEUE_FULL');
      expect(answer.headers['Retry-After']).toMatch(/^\d+$/);
    });

    it(`a BatchError made by the ${fromName} copy keeps its code and exposure in the ${toName} copy`, () => {
      const from = pick(fromName);
      const to = pick(toName);
      const invalid = new from.core.BatchError('INVALID_INPUT', '`prompt` must be a string', {
        details: { field: 'prompt' },
      });
      expect(to.http.toHttpError(invalid)).toEqual({
        status: 400,
        headers: {},
        body: { error: { code: 'INVALID_INPUT', message: '`prompt` must be a string', details: { field: 'prompt' } } },
      });
      const internal = new from.core.BatchError('HANDLER_ERROR', 'secret stack detail');
      const answer = to.http.toHttpError(internal);
      expect(answer.status).toBe(500);
      expect(answer.body.error.message).not.toContain('secret');
      // A plain Error is still not mistaken for a BatchError.
      expect(to.core.isBatchError(new Error('plain'))).toBe(false);
      expect(to.core.isBatchError({ code: 'QUEUE_FULL', message: 'forged' })).toBe(false);
    });

    it(`END and SKIP from the ${fromName} copy end and skip a stream of the ${toName} copy`, async () => {
      const from = pick(fromName);
      const to = pick(toName);
      expect(from.core.END).toBe(to.core.END);
      expect(from.core.SKIP).toBe(to.core.SKIP);
      const tokens = to.core.createStreamingBatcher(async function* (prompts: string[]) {
        yield prompts.map((prompt) => `${prompt}:a`);
        yield prompts.map((prompt) => (prompt === 'short' ? from.core.END : from.core.SKIP));
        yield prompts.map((prompt) => `${prompt}:b`);
      });
      const read = async (prompt: string) => {
        const values: string[] = [];
        for await (const value of tokens.stream(prompt)) values.push(value);
        return values;
      };
      const [short, long] = await Promise.all([read('short'), read('long')]);
      expect(short).toEqual(['short:a']);
      expect(long).toEqual(['long:a', 'long:b']);
      await tokens.close();
    });
  }
});
