// LangChain's OpenAI integrations (`ChatOpenAI`, `OpenAIEmbeddings`) against real `microbatch serve` processes:
// what a RAG pipeline written for OpenAI runs, pointed at this server.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { bundledModelDir } from '@microbatch/serving';
import { type ServerProcess, startServerProcess } from '@microbatch/test-kit';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBertEncoder } from '../../inference/test/helpers/bert-encoder.js';

const BIN = fileURLToPath(new URL('../bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;

function serve(args: readonly string[]): Promise<ServerProcess> {
  return startServerProcess({
    args: [BIN, 'serve', '--port', '0', '--log-format', 'json', ...args],
    env: { ...process.env },
    ready: READY,
  });
}

describe('LangChain ChatOpenAI against microbatch serve', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await serve(['--model', bundledModelDir()]);
  }, 120_000);
  afterAll(() => server?.stop());

  it('invokes and streams the same greedy answer as the openai client', async () => {
    const chat = new ChatOpenAI({
      model: 'tinystories-656k',
      apiKey: 'unused',
      configuration: { baseURL: `${server.url}/v1` },
      temperature: 0,
      maxTokens: 16,
      maxRetries: 0,
    });
    const messages: [string, string][] = [
      ['system', 'You tell short stories.'],
      ['human', 'Tell me about a cat'],
    ];
    const reply = await chat.invoke(messages);
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const direct = await openai.chat.completions.create({
      model: 'm',
      messages: [
        { role: 'system', content: 'You tell short stories.' },
        { role: 'user', content: 'Tell me about a cat' },
      ],
      temperature: 0,
      max_tokens: 16,
    });
    expect(typeof reply.content).toBe('string');
    expect(reply.content).toBe(direct.choices[0]?.message.content);
    let streamed = '';
    for await (const chunk of await chat.stream(messages)) {
      expect(typeof chunk.content).toBe('string');
      streamed += chunk.content as string;
    }
    expect(streamed).toBe(reply.content);
  });
});

describe('LangChain OpenAIEmbeddings against microbatch serve --task feature-extraction', () => {
  let scratch: string;
  let server: ServerProcess;
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'microbatch-langchain-'));
    const model = await writeBertEncoder(join(scratch, 'tiny-minilm'), { hidden: 32 });
    server = await serve(['--task', 'feature-extraction', '--model', model]);
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    await rm(scratch, { recursive: true, force: true });
  });

  it('embeds documents and a query as the openai client does', async () => {
    const embeddings = new OpenAIEmbeddings({
      model: 'tiny-minilm',
      apiKey: 'unused',
      configuration: { baseURL: `${server.url}/v1` },
      maxRetries: 0,
    });
    const documents = ['Cats sleep a lot.', 'Batching pads inputs to the longest.', 'Hello'];
    const vectors = await embeddings.embedDocuments(documents);
    const query = await embeddings.embedQuery('Hello');
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const direct = await openai.embeddings.create({ model: 'm', input: documents, encoding_format: 'float' });
    expect(vectors).toHaveLength(3);
    vectors.forEach((vector, index) => {
      expect(vector).toHaveLength(32);
      const expected = direct.data[index]?.embedding ?? [];
      expect(Math.max(...vector.map((value, d) => Math.abs(value - (expected[d] as number))))).toBeLessThan(1e-6);
    });
    expect(Math.max(...query.map((value, d) => Math.abs(value - (vectors[2]?.[d] as number))))).toBeLessThan(1e-6);
  });
});
