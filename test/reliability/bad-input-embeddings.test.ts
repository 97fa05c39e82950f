// Bad inputs against `microbatch serve --task feature-extraction` on all three frameworks (a BERT-shaped encoder
// generated here from the real MiniLM tokenizer): every one is answered with its exact 4xx and an error body naming
// the field, none carries a stack trace, and the server still embeds afterwards.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../packages/inference/test/helpers/bert-encoder.js';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import { send } from './helpers/http.js';
import { expectOpenAiRefusal } from './helpers/openai-refusal.js';

const BIN = fileURLToPath(new URL('../../packages/cli/bin/microbatch.js', import.meta.url));
const INVALID = 'INVALID_INPUT';
const nested = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const value = (body: unknown): string => JSON.stringify(body);

/** [name, raw JSON body, status, code, field] */
const CASES: ReadonlyArray<readonly [string, string, number, string, string?]> = [
  ['malformed JSON', '{"input": "hi', 400, INVALID],
  ['a 1 MiB body', value({ input: 'a'.repeat(2 ** 20) }), 413, 'ITEM_TOO_LARGE'],
  ['no input', value({}), 400, INVALID, 'input'],
  ['input null', value({ input: null }), 400, INVALID, 'input'],
  ['input an empty string', value({ input: '' }), 400, INVALID, 'input'],
  ['input an empty array', value({ input: [] }), 400, INVALID, 'input'],
  ['input an object', value({ input: { text: 'hi' } }), 400, INVALID, 'input'],
  ['input [null]', value({ input: [null] }), 400, INVALID, 'input[0]'],
  ['input ["ok", ""]', value({ input: ['ok', ''] }), 400, INVALID, 'input[1]'],
  ['input [[]]', value({ input: [[]] }), 400, INVALID, 'input[0]'],
  ['257 inputs', value({ input: Array.from({ length: 257 }, () => 'hi') }), 400, INVALID, 'input'],
  ['input nested 10000 deep', `{"input": ${nested(10_000)}}`, 400, INVALID, 'input[0]'],
  ['a negative token id', value({ input: [101, -1, 102] }), 400, INVALID, 'input'],
  ['a token id past the vocabulary', value({ input: [101, 30522] }), 400, INVALID, 'input'],
  ['a fractional token id', value({ input: [101, 1.5] }), 400, INVALID, 'input'],
  ['token ids mixed with a string', value({ input: [101, 'x'] }), 400, INVALID, 'input[0]'],
  ['513 token ids', value({ input: Array.from({ length: 513 }, () => 1000) }), 400, INVALID, 'input'],
  ['a text past 512 tokens', value({ input: 'word '.repeat(600) }), 400, INVALID, 'input'],
  ['a 20001-character text', value({ input: 'a'.repeat(20_001) }), 400, INVALID, 'input'],
  ['encoding_format "hex"', value({ input: 'hi', encoding_format: 'hex' }), 400, INVALID, 'encoding_format'],
  ['dimensions 16 (not truncatable)', value({ input: 'hi', dimensions: 16 }), 400, INVALID, 'dimensions'],
  ['dimensions 0', value({ input: 'hi', dimensions: 0 }), 400, INVALID, 'dimensions'],
  ['dimensions 1e400', '{"input": "hi", "dimensions": 1e400}', 400, INVALID, 'dimensions'],
  ['model a number', value({ input: 'hi', model: 5 }), 400, INVALID, 'model'],
  ['user of 257 characters', value({ input: 'hi', user: 'u'.repeat(257) }), 400, INVALID, 'user'],
  ['__proto__ carrying input', '{"__proto__": {"input": "hi"}}', 400, INVALID, 'input'],
  ['input whose toString is not a function', '{"input": {"toString": 1}}', 400, INVALID, 'input'],
];

let scratch: string;
let model: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'microbatch-bad-embeddings-'));
  model = await writeBertEncoder(join(scratch, 'tiny-minilm'), { hidden: 32 });
});
afterAll(() => rm(scratch, { recursive: true, force: true }));

describe.each(['express', 'koa', 'nest'])('bad embeddings inputs against microbatch serve (%s)', (framework) => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({
      args: [BIN, 'serve', '--task', 'feature-extraction', '--model', model, '--port', '0', '--framework', framework],
      env: { ...process.env },
      // The CLI's ready line, as pino writes it off a terminal.
      ready: /"url":"(http:[^"]+)","msg":"ready"/,
    });
  });
  afterAll(() => server?.stop());

  const cases = CASES.map(([name, body, status, code, field]) => ({ name, body, status, code, field }));
  it.each(cases)('$name', async ({ body, status, code, field }) => {
    const outcome = await send(server.url, '/v1/embeddings', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      timeoutMs: 30_000,
    });
    // OpenAI's shape, as on every /v1/* endpoint: `type`, and `param` naming the field (or null).
    expectOpenAiRefusal(outcome, { status, code, field });
  });

  it('still embeds afterwards', async () => {
    const outcome = await send(server.url, '/v1/embeddings', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: value({ input: ['still', 'here'] }),
      timeoutMs: 30_000,
    });
    expect(outcome.kind === 'answered' && outcome.answer.status).toBe(200);
  });
});
