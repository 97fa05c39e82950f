// The hostile corpus of the encoder endpoints (rerank, score, classify): each request must be answered with its exact
// 4xx and code, in OpenAI's error shape naming the field, before anything reaches the model.
const value = (body: unknown): string => JSON.stringify(body);

/** One hostile request: which task's server, path, raw JSON body, status, code and the field named. */
export interface EncoderBadInput {
  readonly name: string;
  readonly task: 'rerank' | 'text-classification';
  readonly path: string;
  readonly body: string;
  readonly status: number;
  readonly code: string;
  readonly field?: string;
}

const INVALID = 'INVALID_INPUT';
const MIB = 2 ** 20;
const DOCS = ['a', 'b'];

type Row = [name: string, body: string, status: number, code: string, field?: string];

const RERANK: Row[] = [
  ['malformed JSON', '{"query": "q", "documents": ["a"', 400, INVALID],
  ['a body that is an array', value([{ query: 'q', documents: DOCS }]), 400, INVALID, 'body'],
  [
    '10,000 documents',
    value({ query: 'q', documents: Array.from({ length: 10_000 }, () => 'a') }),
    400,
    INVALID,
    'documents',
  ],
  ['a 1 MiB document', value({ query: 'q', documents: ['a'.repeat(MIB)] }), 413, 'ITEM_TOO_LARGE'],
  ['top_n 0', value({ query: 'q', documents: DOCS, top_n: 0 }), 400, INVALID, 'top_n'],
  ['top_n -1', value({ query: 'q', documents: DOCS, top_n: -1 }), 400, INVALID, 'top_n'],
  ['top_n 1.5', value({ query: 'q', documents: DOCS, top_n: 1.5 }), 400, INVALID, 'top_n'],
  ['top_n "2"', value({ query: 'q', documents: DOCS, top_n: '2' }), 400, INVALID, 'top_n'],
  ['top_n 1e400', '{"query": "q", "documents": ["a"], "top_n": 1e400}', 400, INVALID, 'top_n'],
  ['an empty query', value({ query: '', documents: DOCS }), 400, INVALID, 'query'],
  ['no query', value({ documents: DOCS }), 400, INVALID, 'query'],
  ['query a number', value({ query: 7, documents: DOCS }), 400, INVALID, 'query'],
  ['no documents', value({ query: 'q' }), 400, INVALID, 'documents'],
  ['documents empty', value({ query: 'q', documents: [] }), 400, INVALID, 'documents'],
  ['documents a string', value({ query: 'q', documents: 'a' }), 400, INVALID, 'documents'],
  ['a number document', value({ query: 'q', documents: ['a', 5] }), 400, INVALID, 'documents[1]'],
  ['a null document', value({ query: 'q', documents: [null] }), 400, INVALID, 'documents[0]'],
  ['an array document', value({ query: 'q', documents: [['a']] }), 400, INVALID, 'documents[0]'],
  ['a {text: 5} document', value({ query: 'q', documents: [{ text: 5 }] }), 400, INVALID, 'documents[0].text'],
  ['an empty document', value({ query: 'q', documents: ['a', ''] }), 400, INVALID, 'documents[1]'],
  ['a pair past 512 tokens', value({ query: 'q', documents: ['word '.repeat(600)] }), 400, INVALID, 'documents[0]'],
  ['a 20001-character query', value({ query: 'a'.repeat(20_001), documents: DOCS }), 400, INVALID, 'query'],
  [
    'return_documents "yes"',
    value({ query: 'q', documents: DOCS, return_documents: 'yes' }),
    400,
    INVALID,
    'return_documents',
  ],
  ['model a number', value({ query: 'q', documents: DOCS, model: 1 }), 400, INVALID, 'model'],
  [
    'a 400-token query against 1,000 documents (over 65,536 tokens in all)',
    value({ query: 'word '.repeat(400), documents: Array.from({ length: 1000 }, () => 'a') }),
    400,
    INVALID,
    'documents',
  ],
  ['__proto__ carrying query', '{"__proto__": {"query": "q", "documents": ["a"]}}', 400, INVALID, 'query'],
];

const SCORE: Row[] = [
  ['10,000 text_2', value({ text_1: 'q', text_2: Array.from({ length: 10_000 }, () => 'a') }), 400, INVALID, 'text_2'],
  ['an empty text_1', value({ text_1: '', text_2: 'a' }), 400, INVALID, 'text_1'],
  ['text_2 a number', value({ text_1: 'q', text_2: 3 }), 400, INVALID, 'text_2'],
  ['a non-string text_2', value({ text_1: 'q', text_2: ['a', {}] }), 400, INVALID, 'text_2[1]'],
  ['lists of different lengths', value({ text_1: ['a', 'b'], text_2: ['a', 'b', 'c'] }), 400, INVALID, 'text_2'],
  ['a 1 MiB text_2', value({ text_1: 'q', text_2: 'a'.repeat(MIB) }), 413, 'ITEM_TOO_LARGE'],
];

const CLASSIFY: Row[] = [
  ['malformed JSON', '{"input": "hi', 400, INVALID],
  ['no input', value({}), 400, INVALID, 'input'],
  ['an empty input', value({ input: '' }), 400, INVALID, 'input'],
  ['input empty array', value({ input: [] }), 400, INVALID, 'input'],
  ['10,000 inputs', value({ input: Array.from({ length: 10_000 }, () => 'a') }), 400, INVALID, 'input'],
  ['a 1 MiB input', value({ input: 'a'.repeat(MIB) }), 413, 'ITEM_TOO_LARGE'],
  ['a number input', value({ input: ['a', 1] }), 400, INVALID, 'input[1]'],
  ['input an object', value({ input: { text: 'hi' } }), 400, INVALID, 'input'],
  ['a text past 512 tokens', value({ input: 'word '.repeat(600) }), 400, INVALID, 'input'],
];

const rows = (task: EncoderBadInput['task'], path: string, list: Row[]): EncoderBadInput[] =>
  list.map(([name, body, status, code, field]) => ({
    name,
    task,
    path,
    body,
    status,
    code,
    ...(field ? { field } : {}),
  }));

/** Every hostile encoder request, by task. */
export const ENCODER_BAD_INPUTS: readonly EncoderBadInput[] = [
  ...rows('rerank', '/v1/rerank', RERANK),
  // `/rerank` is the same endpoint: its errors take OpenAI's shape too.
  ...rows('rerank', '/rerank', RERANK.slice(0, 6)),
  ...rows('rerank', '/v1/score', SCORE),
  ...rows('text-classification', '/classify', CLASSIFY),
];
