// The tutorial's "send all queries in parallel": 9 concurrent `GET /adder?number=i` against a running adder
// (default http://127.0.0.1:8000; localhost only). Prints the results and the size of each batch they rode in.
const base = new URL(process.argv.slice(2).find((arg) => arg !== '--') ?? process.env.URL ?? 'http://127.0.0.1:8000');
if (!['127.0.0.1', 'localhost', '[::1]'].includes(base.hostname))
  throw new TypeError(`Expected a localhost URL, got ${base.href}`);

const responses = await Promise.all(Array.from({ length: 9 }, (_, i) => fetch(new URL(`/adder?number=${i}`, base))));
const results = await Promise.all(responses.map(async (response) => Number(await response.text())));
console.log('Result returned:', results);
// One entry per batch, in dispatch order: the tutorial prints (1,), (4,), (4,).
const batches = new Map(
  responses.map((response) => [
    Number(response.headers.get('x-batch-id')),
    Number(response.headers.get('x-batch-size')),
  ]),
);
console.log(
  'Batch sizes:',
  [...batches].sort(([a], [b]) => a - b).map(([, size]) => size),
);
