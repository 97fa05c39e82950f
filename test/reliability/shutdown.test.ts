// SIGTERM during a burst, against the real `microbatch serve` process of each framework: every request whose
// connection was established is answered exactly once (200, or 503 CLOSED with `Connection: close`), no connection
// is reset, and the process exits 0. The signal lands at several offsets after the burst began, so it meets requests
// in every state: connecting, in the listen backlog, not yet read, queued, running, streaming, and finished on an
// idle keep-alive connection. A client that connects after the listener closed is refused (ECONNREFUSED: it never
// reached the server); those are counted apart.
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startServerProcess } from '@microbatch/test-kit';
import { bundledModelDir } from '@microbatch/serving';
import { REPO_ROOT } from './helpers/child.js';
import { type Outcome, errorBody, keepAliveAgent, postJson, send } from './helpers/http.js';
import { FULL, countBy, flush, record } from './helpers/report.js';

const BIN = fileURLToPath(new URL('../../packages/cli/bin/microbatch.js', import.meta.url));
const READY = /"url":"(http:[^"]+)","msg":"ready"/;
const FRAMEWORKS = ['express', 'koa', 'nest'] as const;
/** Milliseconds between the start of the burst and SIGTERM. */
const OFFSETS = [0, 50, 150, 300] as const;
/** Rounds of every offset per framework: the race is caught by repetition, bounded for plain `pnpm test`. */
const ROUNDS = FULL ? 4 : 1;
const BURST = 100;

afterAll(async () => {
  await flush('shutdown');
});

/** One request of the burst: what it was, and what came back. */
interface Sent {
  readonly kind: 'whole' | 'stream' | 'text-query' | 'keep-alive';
  readonly outcome: Promise<Outcome>;
  /** Whether its connection was established (then it must be answered). */
  connected: boolean;
}

// Long enough that the server's event loop is busy with the burst (parsing, checking prompts) while it arrives.
const STORY = 'Once upon a time, there was a little girl who loved to play in the park with her dog. '.repeat(12);

function burst(url: string): Sent[] {
  // A few keep-alive connections too: idle ones must be closed, busy ones end after their last response.
  const agent = keepAliveAgent(4);
  const sent: Sent[] = [];
  for (let i = 0; i < BURST; i += 1) {
    const tokens = 4 + (i % 5) * 8;
    const which = i % 4;
    const request = { connected: false } as Sent & { connected: boolean };
    const options = { onConnect: () => (request.connected = true), timeoutMs: 60_000 };
    const prompt = i % 8 === 0 ? STORY : 'Once upon a time ';
    let outcome: Promise<Outcome>;
    if (which === 0) {
      outcome = postJson(url, '/v1/completions', { prompt, max_tokens: tokens }, options);
    } else if (which === 1) {
      outcome = postJson(url, '/v1/completions', { prompt: 'The cat ', max_tokens: tokens, stream: true }, options);
    } else if (which === 2) {
      outcome = send(url, '/?text=Once+upon+a+time', options);
    } else {
      outcome = postJson(url, '/v1/completions', { prompt: 'A dog ', max_tokens: tokens }, { ...options, agent });
    }
    Object.assign(request, { kind: (['whole', 'stream', 'text-query', 'keep-alive'] as const)[which], outcome });
    sent.push(request);
  }
  void Promise.allSettled(sent.map((request) => request.outcome)).then(() => agent.destroy());
  return sent;
}

/** Why an outcome is not a complete, allowed answer; `undefined` when it is. */
function problemOf(outcome: Outcome): string | undefined {
  if (outcome.kind !== 'answered') return outcome.kind === 'error' ? outcome.error : 'timeout';
  const { status, headers, body } = outcome.answer;
  if (status === 200) return undefined;
  const code = errorBody(body)?.code;
  if (status === 503 && code === 'CLOSED') {
    return headers.connection === 'close' ? undefined : `503 CLOSED without Connection: close (${headers.connection})`;
  }
  return `status ${status} ${code ?? body.slice(0, 100)}`;
}

describe.each(FRAMEWORKS)(
  `SIGTERM during a burst of ${BURST} mixed requests, microbatch serve --framework %s`,
  (framework) => {
    const rows: { offset: number; statuses: Record<string, number>; problems: string[]; exit: number | null }[] = [];

    it.each(OFFSETS.flatMap((offset) => Array.from({ length: ROUNDS }, (_, round) => [offset, round] as const)))(
      'signal %i ms after the burst began (round %i): every request answered once, 0 resets, exit 0',
      async (offset) => {
        const server = await startServerProcess({
          args: [BIN, 'serve', '--model', bundledModelDir(), '--framework', framework, '--port', '0'],
          cwd: REPO_ROOT,
          env: { ...process.env, NODE_ENV: 'production', PORT: '0' },
          ready: READY,
        });
        const sent = burst(server.url);
        await new Promise((resolve) => setTimeout(resolve, offset));
        const exit = await server.stop(30_000);
        const outcomes = await Promise.all(sent.map((request) => request.outcome));
        // Refused at connect: the listener was closed before its handshake, so nothing of it reached the server.
        const refused = (outcome: Outcome, i: number): boolean =>
          sent[i]?.connected === false && outcome.kind === 'error' && outcome.error === 'ECONNREFUSED';
        const problems = outcomes.flatMap((outcome, i) => {
          const problem = refused(outcome, i) ? undefined : problemOf(outcome);
          return problem === undefined ? [] : [`${sent[i]?.kind}: ${problem}`];
        });
        const labels = outcomes.map((outcome, i) =>
          outcome.kind === 'answered'
            ? `${outcome.answer.status}${outcome.answer.status === 200 ? '' : ` ${errorBody(outcome.answer.body)?.code}`}`
            : refused(outcome, i)
              ? 'refused before connecting'
              : `${outcome.kind === 'error' ? outcome.error : 'timeout'}`,
        );
        const statuses = countBy(labels, (label) => label);
        rows.push({ offset, statuses, problems, exit: exit.code });
        expect(problems).toEqual([]);
        expect(exit).toEqual({ code: 0, signal: null });
      },
    );

    afterAll(() => {
      const sentCount = rows.reduce((sum, row) => sum + BURST - (row.statuses['refused before connecting'] ?? 0), 0);
      const failed = rows.reduce((sum, row) => sum + row.problems.length, 0);
      record({
        scenario: `shutdown-${framework}`,
        server: `${framework}-text-completion`,
        requests_sent: sentCount,
        answered_exactly_once: sentCount - failed,
        lost: failed,
        crashes: rows.filter((row) => row.exit !== 0).length,
        detail: { offsets_ms: OFFSETS, rounds: ROUNDS, runs: rows },
      });
      console.log(
        `shutdown ${framework}: ${JSON.stringify(rows.map(({ offset, statuses }) => ({ offset, statuses })))}`,
      );
    });
  },
);
