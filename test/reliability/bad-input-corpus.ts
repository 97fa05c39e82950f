// The bad-input corpus sent to the real text-completion examples (Express, Koa and Nest alike). `BAD_INPUTS` must each be answered with
// their exact 4xx status and error code, as `{"error":{"code","message"}}` with no stack trace; `EDGE_INPUTS` are
// odd but not wrong (unicode edge cases, ignored fields) and must be answered 200 or a 4xx JSON error, never 5xx;
// `PROTOCOL_INPUTS` are broken HTTP that Node's parser (or Express's 404) answers before microbatch sees them.
import { gzipSync } from 'node:zlib';

/** One request: method, path, headers and body (bytes are sent as they are). */
export interface CorpusRequest {
  readonly method: 'GET' | 'POST' | 'PUT';
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
}

export interface BadInput {
  readonly name: string;
  readonly group: string;
  readonly request: CorpusRequest;
  readonly status: number;
  readonly code: string;
  /** `details.field` of the answer, when the server names the field. */
  readonly field?: string;
}

export interface EdgeInput {
  readonly name: string;
  readonly group: string;
  readonly request: CorpusRequest;
  /** Statuses allowed; a 200 must be a well-formed completion, a 4xx a well-formed error. */
  readonly allowed: readonly number[];
  /** Extra check of a 200 answer: an error message, or `undefined` when it is fine. */
  readonly check?: (body: string) => string | undefined;
}

export interface ProtocolInput {
  readonly name: string;
  /** Raw bytes on a fresh connection. */
  readonly bytes: string | Buffer;
  readonly status: number;
}

const JSON_TYPE = { 'content-type': 'application/json' };
const COMPLETIONS = '/v1/completions';

/** POST /v1/completions with a raw JSON text (not re-serialised, so malformed JSON stays malformed). */
const post = (body: string | Buffer, headers: Record<string, string> = JSON_TYPE): CorpusRequest => ({
  method: 'POST',
  path: COMPLETIONS,
  headers,
  body,
});
/** POST /v1/completions with a value serialised as JSON. */
const postValue = (value: unknown): CorpusRequest => post(JSON.stringify(value));
const get = (query: string): CorpusRequest => ({ method: 'GET', path: `/${query}` });
const nested = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const deepObject = (depth: number): string => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

type Bad = [name: string, request: CorpusRequest, status: number, code: string, field?: string];

/** POST /v1/chat/completions with a raw JSON text, or with a value serialised as JSON. */
const chat = (body: string): CorpusRequest => ({
  method: 'POST',
  path: '/v1/chat/completions',
  headers: JSON_TYPE,
  body,
});
const chatValue = (value: unknown): CorpusRequest => chat(JSON.stringify(value));
const USER_HI = [{ role: 'user', content: 'hi' }];

/** The chat endpoint's own bad inputs (its body reading is the same `jsonBody()` as completions'). */
const CHAT_GROUPS: Record<string, Bad[]> = {
  chat: [
    ['malformed JSON', chat('{"messages": [{"role": "user"'), 400, 'INVALID_INPUT'],
    ['a 1 MiB body', chatValue({ messages: [{ role: 'user', content: 'a'.repeat(2 ** 20) }] }), 413, 'ITEM_TOO_LARGE'],
    ['no messages', chatValue({}), 400, 'INVALID_INPUT', 'messages'],
    ['empty messages', chatValue({ messages: [] }), 400, 'INVALID_INPUT', 'messages'],
    ['messages a string', chatValue({ messages: 'hi' }), 400, 'INVALID_INPUT', 'messages'],
    ['messages nested 10000 deep', chat(`{"messages": ${nested(10_000)}}`), 400, 'INVALID_INPUT', 'messages[0]'],
    [
      '257 messages',
      chatValue({ messages: Array.from({ length: 257 }, () => USER_HI[0]) }),
      400,
      'INVALID_INPUT',
      'messages',
    ],
    [
      'an unknown role',
      chatValue({ messages: [{ role: 'robot', content: 'hi' }] }),
      400,
      'INVALID_INPUT',
      'messages[0].role',
    ],
    [
      'a tool message without its tool_call_id',
      chatValue({ messages: [{ role: 'tool', content: 'x' }] }),
      400,
      'INVALID_INPUT',
      'messages[0].tool_call_id',
    ],
    [
      'content a number',
      chatValue({ messages: [{ role: 'user', content: 5 }] }),
      400,
      'INVALID_INPUT',
      'messages[0].content',
    ],
    [
      'content null',
      chatValue({ messages: [{ role: 'user', content: null }] }),
      400,
      'INVALID_INPUT',
      'messages[0].content',
    ],
    [
      'an image part',
      chatValue({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }),
      400,
      'INVALID_INPUT',
      'messages[0].content[0].type',
    ],
    [
      'a part whose toString is not a function',
      chat('{"messages": [{"role": "user", "content": [{"toString": 1}]}]}'),
      400,
      'INVALID_INPUT',
      'messages[0].content[0].type',
    ],
    [
      '__proto__ carrying messages',
      chat('{"__proto__": {"messages": [{"role": "user", "content": "hi"}]}}'),
      400,
      'INVALID_INPUT',
      'messages',
    ],
    [
      'content longer than the context (tokens)',
      chatValue({ messages: [{ role: 'user', content: 'Once upon a time '.repeat(150) }] }),
      400,
      'INVALID_INPUT',
      'messages',
    ],
    [
      'a 5th stop string',
      chatValue({ messages: USER_HI, stop: ['a', 'b', 'c', 'd', 'e'] }),
      400,
      'INVALID_INPUT',
      'stop',
    ],
    [
      'tools',
      chatValue({ messages: USER_HI, tools: [{ type: 'function', function: { name: 'f', parameters: { not: {} } } }] }),
      400,
      'INVALID_INPUT',
      'tools[0].function.parameters',
    ],
    [
      'tool_choice required',
      chatValue({ messages: USER_HI, tool_choice: 'required' }),
      400,
      'INVALID_INPUT',
      'tool_choice',
    ],
    [
      'response_format json_schema without a schema object',
      chatValue({ messages: USER_HI, response_format: { type: 'json_schema', json_schema: 'x' } }),
      400,
      'INVALID_INPUT',
      'response_format',
    ],
    ['n 9', chatValue({ messages: USER_HI, n: 9 }), 400, 'INVALID_INPUT', 'n'],
    ['n 1e400', chat('{"messages": [{"role": "user", "content": "hi"}], "n": 1e400}'), 400, 'INVALID_INPUT', 'n'],
    ['seed 1.5', chatValue({ messages: USER_HI, seed: 1.5 }), 400, 'INVALID_INPUT', 'seed'],
    [
      'top_logprobs 21',
      chatValue({ messages: USER_HI, logprobs: true, top_logprobs: 21 }),
      400,
      'INVALID_INPUT',
      'top_logprobs',
    ],
    ['logprobs "yes"', chatValue({ messages: USER_HI, logprobs: 'yes' }), 400, 'INVALID_INPUT', 'logprobs'],
    [
      'max_completion_tokens 0',
      chatValue({ messages: USER_HI, max_completion_tokens: 0 }),
      400,
      'INVALID_INPUT',
      'max_completion_tokens',
    ],
    [
      'max_completion_tokens past the context',
      chatValue({ messages: [{ role: 'user', content: 'Once upon a time '.repeat(70) }], max_completion_tokens: 256 }),
      400,
      'INVALID_INPUT',
      'max_completion_tokens',
    ],
    ['temperature 3', chatValue({ messages: USER_HI, temperature: 3 }), 400, 'INVALID_INPUT', 'temperature'],
    [
      'stream_options a string',
      chatValue({ messages: USER_HI, stream: true, stream_options: 'x' }),
      400,
      'INVALID_INPUT',
      'stream_options',
    ],
  ],
};

const INVALID = 'INVALID_INPUT';
const TOO_LARGE = 'ITEM_TOO_LARGE';
const MEDIA = 'UNSUPPORTED_MEDIA_TYPE';

const GROUPS: Record<string, Bad[]> = {
  'malformed-json': [
    ['truncated object', post('{"prompt": "Once upon'), 400, INVALID],
    ['single quotes', post("{'prompt': 'hi'}"), 400, INVALID],
    ['unquoted key', post('{prompt: "hi"}'), 400, INVALID],
    ['trailing comma', post('{"prompt": "hi",}'), 400, INVALID],
    ['trailing garbage', post('{"prompt": "hi"} x'), 400, INVALID],
    ['NaN literal', post('{"prompt": "hi", "max_tokens": NaN}'), 400, INVALID],
    ['Infinity literal', post('{"prompt": "hi", "max_tokens": Infinity}'), 400, INVALID],
    ['a comment', post('{"prompt": "hi" /* c */}'), 400, INVALID],
    ['raw newline in a string', post('{"prompt": "a\nb"}'), 400, INVALID],
    ['invalid escape', post('{"prompt": "\\x41"}'), 400, INVALID],
    ['short unicode escape', post('{"prompt": "\\u12"}'), 400, INVALID],
    ['a string at the top', post('"Once upon a time"'), 400, INVALID],
    ['null at the top', post('null'), 400, INVALID],
    ['a number at the top', post('123'), 400, INVALID],
    ['true at the top', post('true'), 400, INVALID],
    ['whitespace only', post('   '), 400, INVALID],
    ['an empty body', post(''), 400, INVALID, 'prompt'],
    ['an empty object', post('{}'), 400, INVALID, 'prompt'],
    ['an empty array', post('[]'), 400, INVALID, 'body'],
    ['an array of bodies', post('[{"prompt": "hi"}]'), 400, INVALID, 'body'],
    ['a duplicate key, last wins', post('{"prompt": "a", "prompt": 5}'), 400, INVALID, 'prompt'],
  ],
  'content-type': [
    // A JSON route takes JSON only: a form post needs no CORS preflight, so any web page could spend the model.
    ['text/plain', post('{"prompt": "hi"}', { 'content-type': 'text/plain' }), 415, MEDIA],
    ['no content-type', post('{"prompt": "hi"}', {}), 415, MEDIA],
    ['form-urlencoded', post('prompt=hi', { 'content-type': 'application/x-www-form-urlencoded' }), 415, MEDIA],
    ['multipart', post('--x\r\n\r\nhi\r\n--x--', { 'content-type': 'multipart/form-data; boundary=x' }), 415, MEDIA],
    ['application/xml', post('<prompt>hi</prompt>', { 'content-type': 'application/xml' }), 415, MEDIA],
    ['charset latin1', post('{"prompt": "hi"}', { 'content-type': 'application/json; charset=latin1' }), 415, MEDIA],
    [
      'charset utf-16 on UTF-8 bytes',
      post('{"prompt": "hi"}', { 'content-type': 'application/json; charset=utf-16' }),
      415,
      MEDIA,
    ],
    [
      'unknown content-encoding',
      post('{"prompt": "hi"}', { ...JSON_TYPE, 'content-encoding': 'x-unknown' }),
      415,
      MEDIA,
    ],
    ['gzip that is not gzip', post('{"prompt": "hi"}', { ...JSON_TYPE, 'content-encoding': 'gzip' }), 400, INVALID],
  ],
  size: [
    ['a 65 KiB body (limit 64 KiB)', postValue({ prompt: 'a'.repeat(65 * 1024) }), 413, TOO_LARGE],
    ['a 1 MiB body', postValue({ prompt: 'a'.repeat(2 ** 20) }), 413, TOO_LARGE],
    ['an 8 MiB body', postValue({ prompt: 'a'.repeat(8 * 2 ** 20) }), 413, TOO_LARGE],
    [
      'a 1 MiB chunked body (no length)',
      post(JSON.stringify({ prompt: 'a'.repeat(2 ** 20) }), { ...JSON_TYPE, 'transfer-encoding': 'chunked' }),
      413,
      TOO_LARGE,
    ],
    [
      'a gzip bomb (5 MB inflated)',
      post(gzipSync(JSON.stringify({ prompt: 'a'.repeat(5_000_000) })), { ...JSON_TYPE, 'content-encoding': 'gzip' }),
      413,
      TOO_LARGE,
    ],
  ],
  nesting: [
    ['prompt: arrays nested 10000 deep', post(`{"prompt": ${nested(10_000)}}`), 400, INVALID, 'prompt'],
    ['model: arrays nested 10000 deep', post(`{"prompt": "hi", "model": ${nested(10_000)}}`), 400, INVALID, 'model'],
    [
      'stream_options: arrays nested 10000 deep',
      post(`{"prompt": "hi", "stream_options": ${nested(10_000)}}`),
      400,
      INVALID,
      'stream_options',
    ],
    ['stop: arrays nested 10000 deep', post(`{"prompt": "hi", "stop": ${nested(10_000)}}`), 400, INVALID, 'stop'],
    ['prompt: objects nested 5000 deep', post(`{"prompt": ${deepObject(5_000)}}`), 400, INVALID, 'prompt'],
    ['the body: arrays nested 20000 deep', post(nested(20_000)), 400, INVALID, 'body'],
  ],
  prototype: [
    // An unread field is refused, naming it (OpenAI refuses unknown arguments too): never read through a prototype.
    ['__proto__ carrying a prompt', post('{"__proto__": {"prompt": "Once upon a time"}}'), 400, INVALID, '__proto__'],
    [
      'constructor.prototype carrying a prompt',
      post('{"constructor": {"prototype": {"prompt": "hi"}}}'),
      400,
      INVALID,
      'constructor',
    ],
    ['prompt: an object with __proto__ null', post('{"prompt": {"__proto__": null}}'), 400, INVALID, 'prompt'],
    ['prompt: an object whose toString is not a function', post('{"prompt": {"toString": 1}}'), 400, INVALID, 'prompt'],
    ['prompt: an array holding such an object', post('{"prompt": ["hi", {"toString": 1}]}'), 400, INVALID, 'prompt'],
    [
      'model: an object whose toString is not a function',
      post('{"prompt": "hi", "model": {"toString": 1}}'),
      400,
      INVALID,
      'model',
    ],
    [
      'stream: toString and valueOf not functions',
      post('{"prompt": "hi", "stream": {"toString": 1, "valueOf": 2}}'),
      400,
      INVALID,
      'stream',
    ],
    ['n: toString null', post('{"prompt": "hi", "n": {"toString": null}}'), 400, INVALID, 'n'],
    [
      'stream_options: an array holding such an object',
      post('{"prompt": "hi", "stream_options": [{"toString": 1}]}'),
      400,
      INVALID,
      'stream_options',
    ],
  ],
  numbers: [
    ['max_tokens -1', postValue({ prompt: 'hi', max_tokens: -1 }), 400, INVALID, 'max_tokens'],
    ['max_tokens 0', postValue({ prompt: 'hi', max_tokens: 0 }), 400, INVALID, 'max_tokens'],
    ['max_tokens -0', post('{"prompt": "hi", "max_tokens": -0}'), 400, INVALID, 'max_tokens'],
    ['max_tokens 1.5', postValue({ prompt: 'hi', max_tokens: 1.5 }), 400, INVALID, 'max_tokens'],
    ['max_tokens 257', postValue({ prompt: 'hi', max_tokens: 257 }), 400, INVALID, 'max_tokens'],
    ['max_tokens 1e400 (Infinity)', post('{"prompt": "hi", "max_tokens": 1e400}'), 400, INVALID, 'max_tokens'],
    ['max_tokens -1e400', post('{"prompt": "hi", "max_tokens": -1e400}'), 400, INVALID, 'max_tokens'],
    ['max_tokens 2^53 + 1', post('{"prompt": "hi", "max_tokens": 9007199254740993}'), 400, INVALID, 'max_tokens'],
    ['max_tokens as a string', postValue({ prompt: 'hi', max_tokens: '16' }), 400, INVALID, 'max_tokens'],
    ['max_tokens true', postValue({ prompt: 'hi', max_tokens: true }), 400, INVALID, 'max_tokens'],
    ['max_tokens [16]', postValue({ prompt: 'hi', max_tokens: [16] }), 400, INVALID, 'max_tokens'],
    ['temperature -0.1', postValue({ prompt: 'hi', temperature: -0.1 }), 400, INVALID, 'temperature'],
    ['temperature 2.01', postValue({ prompt: 'hi', temperature: 2.01 }), 400, INVALID, 'temperature'],
    ['temperature 1e400', post('{"prompt": "hi", "temperature": 1e400}'), 400, INVALID, 'temperature'],
    ['temperature as a string', postValue({ prompt: 'hi', temperature: '0.5' }), 400, INVALID, 'temperature'],
    ['top_p 0', postValue({ prompt: 'hi', top_p: 0 }), 400, INVALID, 'top_p'],
    ['top_p -1', postValue({ prompt: 'hi', top_p: -1 }), 400, INVALID, 'top_p'],
    ['top_p 1.01', postValue({ prompt: 'hi', top_p: 1.01 }), 400, INVALID, 'top_p'],
    ['top_p as a string', postValue({ prompt: 'hi', top_p: '1' }), 400, INVALID, 'top_p'],
    ['n 2', postValue({ prompt: 'hi', n: 2 }), 400, INVALID, 'n'],
    ['n -1', postValue({ prompt: 'hi', n: -1 }), 400, INVALID, 'n'],
    ['best_of 3', postValue({ prompt: 'hi', best_of: 3 }), 400, INVALID, 'best_of'],
    ['logprobs 5', postValue({ prompt: 'hi', logprobs: 5 }), 400, INVALID, 'logprobs'],
  ],
  types: [
    ['prompt a number', postValue({ prompt: 42 }), 400, INVALID, 'prompt'],
    ['prompt true', postValue({ prompt: true }), 400, INVALID, 'prompt'],
    ['prompt null', postValue({ prompt: null }), 400, INVALID, 'prompt'],
    ['prompt an object', postValue({ prompt: { text: 'hi' } }), 400, INVALID, 'prompt'],
    ['prompt token ids', postValue({ prompt: [1, 2, 3] }), 400, INVALID, 'prompt'],
    ['prompt [null]', postValue({ prompt: [null] }), 400, INVALID, 'prompt'],
    ['model a number', postValue({ prompt: 'hi', model: 5 }), 400, INVALID, 'model'],
    ['stream "yes"', postValue({ prompt: 'hi', stream: 'yes' }), 400, INVALID, 'stream'],
    ['stream 1', postValue({ prompt: 'hi', stream: 1 }), 400, INVALID, 'stream'],
    [
      'stream_options a string',
      postValue({ prompt: 'hi', stream: true, stream_options: 'usage' }),
      400,
      INVALID,
      'stream_options',
    ],
    [
      'stream_options.include_usage "yes"',
      postValue({ prompt: 'hi', stream: true, stream_options: { include_usage: 'yes' } }),
      400,
      INVALID,
      'stream_options',
    ],
    ['echo true', postValue({ prompt: 'hi', echo: true }), 400, INVALID, 'echo'],
    ['suffix', postValue({ prompt: 'hi', suffix: ' the end' }), 400, INVALID, 'suffix'],
    ['stop a number', postValue({ prompt: 'hi', stop: 5 }), 400, INVALID, 'stop'],
    ['stop [""]', postValue({ prompt: 'hi', stop: [''] }), 400, INVALID, 'stop'],
    ['stop ["a", 1]', postValue({ prompt: 'hi', stop: ['a', 1] }), 400, INVALID, 'stop'],
    ['stop: 5 strings (most 4)', postValue({ prompt: 'hi', stop: ['a', 'b', 'c', 'd', 'e'] }), 400, INVALID, 'stop'],
    ['stop: 65 characters (most 64)', postValue({ prompt: 'hi', stop: 'x'.repeat(65) }), 400, INVALID, 'stop'],
  ],
  prompt: [
    ['an empty prompt', postValue({ prompt: '' }), 400, INVALID, 'prompt'],
    ['a blank prompt', postValue({ prompt: '   ' }), 400, INVALID, 'prompt'],
    ['a tab-and-newline prompt', postValue({ prompt: '\t\n\r' }), 400, INVALID, 'prompt'],
    ['a 4001-character prompt', postValue({ prompt: 'a'.repeat(4001) }), 400, INVALID, 'prompt'],
    [
      'a prompt longer than the context (tokens)',
      postValue({ prompt: 'Once upon a time '.repeat(150) }),
      400,
      INVALID,
      'prompt',
    ],
    [
      'combining marks: 3000 tokens in 3000 characters',
      postValue({ prompt: 'e\u0301'.repeat(1500) }),
      400,
      INVALID,
      'prompt',
    ],
    [
      'a prompt that leaves no room for max_tokens',
      postValue({ prompt: 'Once upon a time '.repeat(70), max_tokens: 256 }),
      400,
      INVALID,
      'max_tokens',
    ],
  ],
  'prompt-array': [
    ['an empty prompt array', postValue({ prompt: [] }), 400, INVALID, 'prompt'],
    ['17 prompts (most 16)', postValue({ prompt: Array.from({ length: 17 }, () => 'hi') }), 400, INVALID, 'prompt'],
    ['1000 prompts', postValue({ prompt: Array.from({ length: 1000 }, () => 'hi') }), 400, INVALID, 'prompt'],
    ['10000 prompts', postValue({ prompt: Array.from({ length: 10_000 }, () => 'a') }), 400, INVALID, 'prompt'],
    ['an empty prompt among good ones', postValue({ prompt: ['Once upon a time', ''] }), 400, INVALID, 'prompt'],
    ['a number among the prompts', postValue({ prompt: ['a', 'b', 'c', 4] }), 400, INVALID, 'prompt'],
    [
      '16 prompts, one too long',
      postValue({ prompt: [...Array.from({ length: 15 }, () => 'hi'), 'a'.repeat(4001)] }),
      400,
      INVALID,
      'prompt',
    ],
  ],
  query: [
    ['GET / without text', get(''), 400, INVALID, 'text'],
    ['GET / with text twice', get('?text=a&text=b'), 400, INVALID, 'text'],
    ['GET / with text[a]=b', get('?text[a]=b'), 400, INVALID, 'text'],
    ['GET / with an empty text', get('?text='), 400, INVALID, 'text'],
    ['GET / with a blank text', get('?text=%20%20'), 400, INVALID, 'text'],
    ['GET / with 4001 characters', get(`?text=${'a'.repeat(4001)}`), 400, INVALID, 'text'],
    [
      'GET / longer than the context',
      get(`?text=${encodeURIComponent('Once upon a time '.repeat(150))}`),
      400,
      INVALID,
      'text',
    ],
  ],
  ...CHAT_GROUPS,
};

export const BAD_INPUTS: readonly BadInput[] = Object.entries(GROUPS).flatMap(([group, cases]) =>
  cases.map(([name, request, status, code, field]) => ({
    name,
    group,
    request,
    status,
    code,
    ...(field === undefined ? {} : { field }),
  })),
);

/** A 200 of `POST /v1/completions` must be one well-formed `text_completion` whose usage respects `max_tokens`. */
function completionWithin(maxTokens: number): (body: string) => string | undefined {
  return (body) => {
    const parsed = JSON.parse(body) as {
      object?: unknown;
      choices?: { text?: unknown }[];
      usage?: { completion_tokens?: unknown };
    };
    if (parsed.object !== 'text_completion' || typeof parsed.choices?.[0]?.text !== 'string')
      return 'not a text_completion';
    const tokens = parsed.usage?.completion_tokens;
    return typeof tokens === 'number' && tokens >= 1 && tokens <= maxTokens
      ? undefined
      : `completion_tokens ${String(tokens)} not in 1..${maxTokens}`;
  };
}

const ok200or400 = [200, 400] as const;

export const EDGE_INPUTS: readonly EdgeInput[] = [
  ['emoji', postValue({ prompt: 'The 🦄 and the 🌈 went 👨‍👩‍👧 ', max_tokens: 4 })],
  ['right-to-left text and an override mark', postValue({ prompt: 'مرحبا \u202eOnce upon a time ', max_tokens: 4 })],
  ['a NUL character', postValue({ prompt: 'Once\u0000upon a time ', max_tokens: 4 })],
  ['a lone high surrogate', post('{"prompt": "Once \\ud800 upon a time ", "max_tokens": 4}')],
  ['a lone low surrogate', post('{"prompt": "\\udc00 Once upon a time ", "max_tokens": 4}')],
  [
    'zero-width joiners and a BOM inside the text',
    postValue({ prompt: 'Once\u200d\u200d upon\ufeff a time ', max_tokens: 4 }),
  ],
  [
    'invalid UTF-8 bytes',
    post(
      Buffer.concat([
        Buffer.from('{"prompt": "Once '),
        Buffer.from([0xff, 0xfe, 0xc3]),
        Buffer.from(' upon", "max_tokens": 4}'),
      ]),
    ),
  ],
  [
    'an overlong UTF-8 encoding of "/"',
    post(
      Buffer.concat([
        Buffer.from('{"prompt": "Once '),
        Buffer.from([0xc0, 0xaf]),
        Buffer.from(' upon", "max_tokens": 4}'),
      ]),
    ),
  ],
  ['a byte-order mark before the JSON', post('\ufeff{"prompt": "Once upon a time ", "max_tokens": 4}')],
  ['GET / with a NUL', get('?text=Once%00upon')],
  ['GET / with a lone surrogate (CESU bytes)', get('?text=%ED%A0%80%20Once')],
  ['GET / with broken percent-encoding', get('?text=%E0%A4%A')],
].map(([name, request]) => ({
  name: name as string,
  group: 'unicode',
  request: request as CorpusRequest,
  allowed: ok200or400,
}));

/** Odd but valid bodies whose 200 must show the oddity was ignored, not obeyed. */
export const IGNORED_INPUTS: readonly EdgeInput[] = [
  {
    name: '__proto__ carrying max_tokens 200 (refused as an unread field, never applied)',
    group: 'prototype',
    request: post('{"prompt": "Once upon a time ", "__proto__": {"max_tokens": 200}}'),
    allowed: [400],
  },
  {
    name: 'an unknown field nested 10000 deep (refused as an unread field, not walked)',
    group: 'nesting',
    request: post(`{"prompt": "Once upon a time ", "max_tokens": 4, "x": ${nested(10_000)}}`),
    allowed: [400],
  },
  {
    name: 'temperature 1e-45 (a denormal, below the floor MIN_TEMPERATURE: greedy)',
    group: 'numbers',
    request: post('{"prompt": "Once upon a time ", "max_tokens": 4, "temperature": 1e-45}'),
    allowed: [200],
    check: completionWithin(4),
  },
  {
    name: '16 prompts (no MaxListenersExceededWarning on stderr)',
    group: 'prompt-array',
    request: postValue({
      prompt: Array.from({ length: 16 }, (_, index) => `Once upon a time ${index} `),
      max_tokens: 1,
    }),
    allowed: [200],
    check: (body) => {
      const parsed = JSON.parse(body) as { choices?: unknown[] };
      return parsed.choices?.length === 16 ? undefined : `${String(parsed.choices?.length)} choices, expected 16`;
    },
  },
  {
    name: 'max_tokens 1.0 (JSON has one number type: the integer 1)',
    group: 'numbers',
    request: post('{"prompt": "Once upon a time ", "max_tokens": 1.0}'),
    allowed: [200],
    check: completionWithin(1),
  },
  {
    name: 'temperature 1e-400 (underflows to 0: greedy)',
    group: 'numbers',
    request: post('{"prompt": "Once upon a time ", "max_tokens": 4, "temperature": 1e-400}'),
    allowed: [200],
    check: completionWithin(4),
  },
];

const h = (lines: string[]): string => `${lines.join('\r\n')}\r\n\r\n`;

export const PROTOCOL_INPUTS: readonly ProtocolInput[] = [
  { name: 'a garbage request line', bytes: 'HELLO\r\n\r\n', status: 400 },
  { name: 'an HTTP/2 preface on HTTP/1.1', bytes: 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', status: 400 },
  { name: 'HTTP/3.0', bytes: h(['GET /healthz HTTP/3.0', 'Host: x']), status: 400 },
  { name: 'no Host header', bytes: h(['GET /healthz HTTP/1.1']), status: 400 },
  {
    name: 'a NUL in a header value',
    bytes: Buffer.from(h(['GET /healthz HTTP/1.1', 'Host: x', 'X-A: a\u0000b']), 'latin1'),
    status: 400,
  },
  {
    name: 'Content-Length and Transfer-Encoding both',
    bytes: `${h(['POST /v1/completions HTTP/1.1', 'Host: x', 'Content-Type: application/json', 'Content-Length: 5', 'Transfer-Encoding: chunked'])}0\r\n\r\n`,
    status: 400,
  },
  {
    name: 'two different Content-Lengths',
    bytes: `${h(['POST /v1/completions HTTP/1.1', 'Host: x', 'Content-Length: 5', 'Content-Length: 6'])}hello!`,
    status: 400,
  },
  {
    name: 'a negative Content-Length',
    bytes: h(['POST /v1/completions HTTP/1.1', 'Host: x', 'Content-Length: -1']),
    status: 400,
  },
  {
    name: 'an invalid chunk size',
    bytes: `${h(['POST /v1/completions HTTP/1.1', 'Host: x', 'Content-Type: application/json', 'Transfer-Encoding: chunked'])}zz\r\nabc\r\n0\r\n\r\n`,
    status: 400,
  },
  {
    name: 'a 20 KB header',
    bytes: h(['GET /healthz HTTP/1.1', 'Host: x', `X-Big: ${'a'.repeat(20_000)}`]),
    status: 431,
  },
  { name: 'a 20 KB URL', bytes: h([`GET /?text=${'a'.repeat(20_000)} HTTP/1.1`, 'Host: x']), status: 431 },
  { name: 'an unknown path (404)', bytes: h(['GET /nope HTTP/1.1', 'Host: x', 'Connection: close']), status: 404 },
  // Paths that resolve to a route only if normalised: every framework answers them 404, none 405 for the route.
  {
    name: 'a dot-segment path (404)',
    bytes: h(['GET /v1/../healthz HTTP/1.1', 'Host: x', 'Connection: close']),
    status: 404,
  },
  { name: 'a doubled slash (404)', bytes: h(['GET //healthz HTTP/1.1', 'Host: x', 'Connection: close']), status: 404 },
  {
    name: 'a doubled slash before the completions route (404)',
    bytes: `${h(['POST //v1/completions HTTP/1.1', 'Host: x', 'Content-Type: application/json', 'Content-Length: 2', 'Connection: close'])}{}`,
    status: 404,
  },
  {
    name: 'PUT on the completions route (405 with Allow)',
    bytes: h(['PUT /v1/completions HTTP/1.1', 'Host: x', 'Content-Length: 0', 'Connection: close']),
    status: 405,
  },
  {
    name: 'an announced 200 MB body, none sent (413 before reading)',
    bytes: h([
      'POST /v1/completions HTTP/1.1',
      'Host: x',
      'Content-Type: application/json',
      'Content-Length: 200000000',
    ]),
    status: 413,
  },
  {
    name: 'Expect: 100-continue for 200 MB (413 instead of 100 Continue)',
    bytes: h([
      'POST /v1/completions HTTP/1.1',
      'Host: x',
      'Content-Type: application/json',
      'Content-Length: 200000000',
      'Expect: 100-continue',
    ]),
    status: 413,
  },
];
