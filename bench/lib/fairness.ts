// Issue 11's fairness scenario over HTTP: the real `microbatch serve` (Express app of @microbatch/serving, the
// bundled model, `--max-latency-ms 2000`, otherwise its defaults) with a heavy client (6 closed loops of 16 prompts
// x 256 tokens, from 127.0.0.2) and a light one (1-token completions, from 127.0.0.3) at once. The server's fairness
// key is the client's address (never OpenAI's `user`, which both clients used to send from one address, so they
// shared one fair share: issue 37); each prompt costs its prompt + max_tokens tokens.
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { closedLoops, pacedRequests } from './fairness-clients.js';
import type { ClientTarget, Outcome } from './fairness-clients.js';
import { machineInfo, waitForQuiet } from './machine.js';
import type { MachineInfo } from './machine.js';
import { REPO_ROOT, TEXT_MODEL_DIR } from './paths.js';
import type { Progress } from './progress.js';
import { median, percentile, round } from './stats.js';
import { textWorkload } from './workloads.js';

export const FAIRNESS_MAX_LATENCY_MS = 2000;
export const HEAVY_LOOPS = 6;
export const HEAVY_PROMPTS = 16;
export const HEAVY_TOKENS = 256;
/** Light requests per second: a client that asks little, sampling the server evenly in time. */
export const LIGHT_RATE = 10;
export type Scheduling = 'continuous' | 'request';
/** `microbatch serve`'s default first: the targets are about it. */
export const SCHEDULINGS: readonly Scheduling[] = ['continuous', 'request'];

/** The in-repository launcher (sources through tsx); BENCH_MICROBATCH_BIN runs another build, e.g. an installed one. */
const BIN =
  process.env.BENCH_MICROBATCH_BIN || fileURLToPath(new URL('../../packages/cli/bin/microbatch.js', import.meta.url));
const PROMPTS = (textWorkload.bodies as ReadonlyArray<{ prompt: string }>).map((body) => body.prompt);
const HEAVY_BODY = { prompt: PROMPTS.slice(0, HEAVY_PROMPTS), max_tokens: HEAVY_TOKENS };
const LIGHT_BODIES = PROMPTS.map((prompt) => ({ prompt, max_tokens: 1 }));
/** Each client's loopback address: its fairness key at the server. */
export const HEAVY_ADDRESS = '127.0.0.2';
export const LIGHT_ADDRESS = '127.0.0.3';

export interface ClientSummary {
  readonly sent: number;
  readonly ok: number;
  readonly ok_share: number;
  /** Answers by status (and error code): `"200"`, `"503 OVERLOADED"`, `"0 CLIENT_ERROR"` for no response. */
  readonly statuses: Readonly<Record<string, number>>;
  readonly refused: number;
  readonly refused_with_retry_after: number;
  /** Latency of the 200 answers. */
  readonly p50_ms: number;
  readonly p90_ms: number;
  readonly p99_ms: number;
}

export interface FairnessRun {
  readonly scheduling: Scheduling;
  readonly max_latency_ms: number;
  readonly warm_s: number;
  readonly measure_s: number;
  /** The light client alone for a few seconds before the heavy one starts: its unloaded latency. */
  readonly light_alone: ClientSummary;
  readonly light: ClientSummary;
  readonly heavy: ClientSummary & {
    /** 200 answers (of 16 completions each) per second of the window, and their generated tokens per second. */
    readonly ok_per_s: number;
    readonly completion_tokens_per_s: number;
    readonly retry_after_s: { readonly min: number; readonly median: number; readonly max: number } | null;
  };
  /** From the server's /metrics over the window: refusals by reason and OVERLOADED by cause, both batchers. */
  readonly server: {
    readonly rejections: Readonly<Record<string, number>>;
    readonly overloaded: Readonly<Record<string, number>>;
    readonly ms_per_cost: number;
    readonly ms_per_batch: number;
  };
}

export interface FairnessSummary {
  readonly started_at: string;
  readonly machine: MachineInfo;
  readonly heavy: { readonly loops: number; readonly prompts: number; readonly max_tokens: number };
  readonly light: { readonly rate: number; readonly max_tokens: 1 };
  readonly runs: readonly FairnessRun[];
}

interface CliServer {
  readonly port: number;
  metrics(): Promise<string>;
  stop(): Promise<void>;
}

/** `microbatch serve` on a free port, as a user starts it; resolves once it logged `ready`. */
async function startCli(scheduling: Scheduling): Promise<CliServer> {
  const args = [
    'serve',
    '--model',
    TEXT_MODEL_DIR,
    '--port',
    '0',
    '--max-latency-ms',
    String(FAIRNESS_MAX_LATENCY_MS),
    '--scheduling',
    scheduling,
    '--log-format',
    'json',
  ];
  const child: ChildProcess = spawn(process.execPath, [BIN, ...args], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-5_000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // The server's log (a line per batch) is dropped unless BENCH_SERVER_LOG names a file to append it to.
  const logFile = process.env.BENCH_SERVER_LOG;
  if (logFile !== undefined && logFile !== '') child.stdout?.pipe(createWriteStream(logFile, { flags: 'a' }));
  let timer: NodeJS.Timeout | undefined;
  let url: string;
  try {
    url = await new Promise<string>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`microbatch serve was not ready in 120 s:\n${stderr}`)), 120_000);
      createInterface({ input: child.stdout as NonNullable<ChildProcess['stdout']> }).on('line', (line) => {
        if (!line.includes('"ready"')) return;
        const { msg, url: ready } = JSON.parse(line) as { msg?: string; url?: string };
        if (msg === 'ready' && ready !== undefined) resolve(ready);
      });
      void exited.then((code) => reject(new Error(`microbatch serve exited with code ${code}:\n${stderr}`)));
    });
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  } finally {
    clearTimeout(timer);
  }
  let stopping = false;
  // A server that dies mid-run is reported with its own words rather than as refused connections.
  void exited.then((code) => {
    if (!stopping) process.stderr.write(`\nmicrobatch serve (${scheduling}) exited with code ${code}:\n${stderr}\n`);
  });
  return {
    port: Number(new URL(url).port),
    metrics: async () => (await fetch(`${url}/metrics`)).text(),
    async stop() {
      stopping = true;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Sums a counter's samples by one label, over every batcher: `{ latency: 12, fair_share: 3 }`. */
function countsBy(metrics: string, name: string, label: string): Record<string, number> {
  const counts: Record<string, number> = {};
  const pattern = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`);
  for (const line of metrics.split('\n')) {
    const match = pattern.exec(line);
    const key = match?.[1] === undefined ? undefined : new RegExp(`${label}="([^"]*)"`).exec(match[1])?.[1];
    if (match === null || key === undefined) continue;
    counts[key] = (counts[key] ?? 0) + Number(match[2]);
  }
  return counts;
}

const gauge = (metrics: string, name: string): number => {
  const match = new RegExp(`^${name}\\{name="generate"\\} (\\S+)$`, 'm').exec(metrics);
  return match?.[1] === undefined ? Number.NaN : round(Number(match[1]), 4);
};

function difference(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const result: Record<string, number> = {};
  for (const [key, value] of Object.entries(after))
    if (value - (before[key] ?? 0) > 0) result[key] = value - (before[key] ?? 0);
  return result;
}

function summarizeClient(outcomes: readonly Outcome[]): ClientSummary {
  const statuses: Record<string, number> = {};
  for (const o of outcomes) {
    const key = o.status === 200 ? '200' : `${o.status} ${o.code ?? '?'}`;
    statuses[key] = (statuses[key] ?? 0) + 1;
  }
  const ok = outcomes.filter((o) => o.status === 200);
  const okMs = ok.map((o) => o.ms).sort((a, b) => a - b);
  const refused = outcomes.filter((o) => o.status === 503);
  return {
    sent: outcomes.length,
    ok: ok.length,
    ok_share: outcomes.length === 0 ? Number.NaN : round(ok.length / outcomes.length, 4),
    statuses,
    refused: refused.length,
    refused_with_retry_after: refused.filter((o) => o.retryAfterS !== undefined).length,
    p50_ms: round(percentile(okMs, 50)),
    p90_ms: round(percentile(okMs, 90)),
    p99_ms: round(percentile(okMs, 99)),
  };
}

/** One server, one scheduling: the light client alone, then both clients; outcomes of requests sent in the window. */
export async function runFairnessOnce(
  scheduling: Scheduling,
  timing: { warmS: number; measureS: number; aloneS: number },
  progress: Progress,
): Promise<FairnessRun> {
  const server = await startCli(scheduling);
  try {
    const start = performance.now();
    const target: ClientTarget = { port: server.port, now: () => performance.now() - start };
    const heavyTarget: ClientTarget = { ...target, localAddress: HEAVY_ADDRESS };
    const lightTarget: ClientTarget = { ...target, localAddress: LIGHT_ADDRESS };
    const alone: Outcome[] = [];
    progress.update('light client alone');
    await pacedRequests(lightTarget, LIGHT_BODIES, LIGHT_RATE, target.now() + timing.aloneS * 1000, alone);

    const fromMs = target.now() + timing.warmS * 1000;
    const untilMs = fromMs + timing.measureS * 1000;
    const heavy: Outcome[] = [];
    const light: Outcome[] = [];
    let before = '';
    const scrape = setTimeout(() => {
      server.metrics().then(
        (text) => {
          before = text;
        },
        () => undefined, // the counts then cover the warm-up too; a dead server is reported by startCli
      );
    }, fromMs - target.now());
    const ticker = setInterval(() => {
      const lightOk = light.filter((o) => o.status === 200).length;
      progress.update(
        `${scheduling}: ${(target.now() / 1000).toFixed(0)} s, light ${lightOk}/${light.length} ok, heavy ${heavy.filter((o) => o.status === 200).length}/${heavy.length} ok`,
      );
    }, 500);
    await Promise.all([
      closedLoops(heavyTarget, HEAVY_BODY, HEAVY_LOOPS, untilMs, heavy),
      pacedRequests(lightTarget, LIGHT_BODIES, LIGHT_RATE, untilMs, light),
    ]);
    clearInterval(ticker);
    clearTimeout(scrape);
    const after = await server.metrics();

    const inWindow = (o: Outcome) => o.sentAtMs >= fromMs && o.sentAtMs < untilMs;
    const heavyWindow = heavy.filter(inWindow);
    const heavyOk = heavyWindow.filter((o) => o.status === 200);
    const retryAfters = heavyWindow
      .flatMap((o) => (o.retryAfterS === undefined ? [] : [o.retryAfterS]))
      .sort((a, b) => a - b);
    return {
      scheduling,
      max_latency_ms: FAIRNESS_MAX_LATENCY_MS,
      warm_s: timing.warmS,
      measure_s: timing.measureS,
      light_alone: summarizeClient(alone),
      light: summarizeClient(light.filter(inWindow)),
      heavy: {
        ...summarizeClient(heavyWindow),
        ok_per_s: round(heavyOk.length / timing.measureS, 2),
        completion_tokens_per_s: round(heavyOk.reduce((sum, o) => sum + o.completionTokens, 0) / timing.measureS),
        retry_after_s:
          retryAfters.length === 0
            ? null
            : {
                min: retryAfters[0] as number,
                median: median(retryAfters),
                max: retryAfters[retryAfters.length - 1] as number,
              },
      },
      server: {
        rejections: difference(
          countsBy(after, 'microbatch_rejections_total', 'reason'),
          countsBy(before, 'microbatch_rejections_total', 'reason'),
        ),
        overloaded: difference(
          countsBy(after, 'microbatch_overload_refusals_total', 'cause'),
          countsBy(before, 'microbatch_overload_refusals_total', 'cause'),
        ),
        ms_per_cost: gauge(after, 'microbatch_latency_estimate_ms_per_cost'),
        ms_per_batch: gauge(after, 'microbatch_latency_estimate_ms_per_batch'),
      },
    };
  } finally {
    await server.stop();
  }
}

/** Planned seconds of {@link runFairness}, for the progress display. */
export function fairnessSeconds(quick: boolean, schedulings: readonly Scheduling[] = SCHEDULINGS): number {
  const { warmS, measureS, aloneS } = fairnessTiming(quick);
  return schedulings.length * (8 + aloneS + warmS + measureS + 5);
}

function fairnessTiming(quick: boolean): { warmS: number; measureS: number; aloneS: number } {
  return quick ? { warmS: 3, measureS: 6, aloneS: 1 } : { warmS: 5, measureS: 25, aloneS: 3 };
}

/** The scenario on each scheduling, `microbatch serve`'s default first. */
export async function runFairness(options: {
  readonly quick: boolean;
  readonly progress: Progress;
  readonly schedulings?: readonly Scheduling[];
}): Promise<FairnessSummary> {
  const { quick, progress, schedulings = SCHEDULINGS } = options;
  const timing = fairnessTiming(quick);
  const startedAt = new Date();
  const machine = machineInfo();
  const runs: FairnessRun[] = [];
  for (const scheduling of schedulings) {
    const name = `fairness, ${scheduling} scheduling`;
    progress.begin(name, 8 + timing.aloneS + timing.warmS + timing.measureS + 5);
    await waitForQuiet(1500);
    const run = await runFairnessOnce(scheduling, timing, progress);
    runs.push(run);
    progress.end(
      `${name}: light ${run.light.ok}/${run.light.sent} answered 200 (p50 ${run.light.p50_ms.toFixed(0)} ms, p90 ${run.light.p90_ms.toFixed(0)} ms; alone p50 ${run.light_alone.p50_ms.toFixed(0)} ms); ` +
        `heavy ${JSON.stringify(run.heavy.statuses)}, ${run.heavy.ok_per_s} ok/s; server refusals ${JSON.stringify(run.server.overloaded)}`,
    );
  }
  return {
    started_at: startedAt.toISOString(),
    machine,
    heavy: { loops: HEAVY_LOOPS, prompts: HEAVY_PROMPTS, max_tokens: HEAVY_TOKENS },
    light: { rate: LIGHT_RATE, max_tokens: 1 },
    runs,
  };
}
