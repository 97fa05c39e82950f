// Global setup of `pnpm test:reliability`: gives the test files a folder for their scenario results, and on
// teardown merges them into bench/results/reliability.json (totals first, then every scenario's detail).
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import type { ScenarioResult } from './helpers/report.js';

const RESULTS = fileURLToPath(new URL('../../bench/results/reliability.json', import.meta.url));

/** The scenarios every full run must report; a missing one is named in the file. */
const EXPECTED = [
  'bad-input',
  'bad-input-koa',
  'bad-input-fastify',
  'bad-input-hono',
  'bad-input-nest',
  'poison-isolate',
  'poison-fail-batch',
  'poison-worker-crash-isolate',
  'worker-crash',
  'worker-uncaught-exception',
  'hang',
  'load-failure-example',
  'load-failure-fault-server',
  'disconnect-storm',
  'abandoned-running-batches',
  'abandoned-running-batches-continuous',
  'overload',
  'shutdown-express',
  'shutdown-koa',
  'shutdown-nest',
];

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(join(tmpdir(), 'microbatch-reliability-'));
  project.provide('reliabilityResultsDir', dir);
  const started = new Date();
  return async () => {
    const scenarios: ScenarioResult[] = [];
    for (const file of (await readdir(dir)).sort()) {
      scenarios.push(...(JSON.parse(await readFile(join(dir, file), 'utf8')) as ScenarioResult[]));
    }
    await rm(dir, { recursive: true, force: true });
    const total = (
      key:
        | 'requests_sent'
        | 'answered_exactly_once'
        | 'lost'
        | 'crashes'
        | 'bad_inputs_tried'
        | 'bad_inputs_rejected_4xx',
    ) => scenarios.reduce((sum, scenario) => sum + (scenario[key] ?? 0), 0);
    const names = new Set(scenarios.map((scenario) => scenario.scenario));
    const report = {
      requests_sent: total('requests_sent'),
      answered_exactly_once: total('answered_exactly_once'),
      lost: total('lost'),
      crashes: total('crashes'),
      bad_inputs_tried: total('bad_inputs_tried'),
      bad_inputs_rejected_4xx: total('bad_inputs_rejected_4xx'),
      missing_scenarios: EXPECTED.filter((name) => !names.has(name)),
      // The bad-input corpus runs against each framework's example: the same line on all three.
      bad_input_by_framework: Object.fromEntries(
        scenarios
          .filter((scenario) => scenario.scenario.startsWith('bad-input'))
          .map((scenario) => [
            scenario.server.replace(/-text-completion$/, ''),
            {
              requests_sent: scenario.requests_sent,
              lost: scenario.lost,
              crashes: scenario.crashes,
              bad_inputs_tried: scenario.bad_inputs_tried,
              bad_inputs_rejected_4xx: scenario.bad_inputs_rejected_4xx,
              protocol_inputs_rejected_4xx: scenario.detail.protocol_inputs_rejected_4xx,
              protocol_inputs_tried: scenario.detail.protocol_inputs_tried,
            },
          ]),
      ),
      definitions: {
        requests_sent:
          'requests that must be answered (deliberately aborted storm clients are counted in their scenario only)',
        answered_exactly_once: 'requests with exactly one complete HTTP response',
        lost: 'requests_sent - answered_exactly_once: connection errors, truncated responses and timeouts',
        crashes: 'server processes that died during a scenario or did not exit cleanly on SIGTERM',
        bad_inputs_rejected_4xx: 'bad inputs answered 4xx with exactly {"error":{"code","message"}} and no stack trace',
      },
      run: {
        started: started.toISOString(),
        finished: new Date().toISOString(),
        node: process.version,
        cpus: availableParallelism(),
        cpu_model: cpus()[0]?.model ?? 'unknown',
        memory_gib: Math.round(totalmem() / 2 ** 30),
      },
      scenarios: Object.fromEntries(scenarios.map(({ scenario, ...rest }) => [scenario, rest])),
    };
    await mkdir(join(RESULTS, '..'), { recursive: true });
    await writeFile(RESULTS, `${JSON.stringify(report, null, 2)}\n`);
    console.log(`reliability: wrote ${RESULTS}`);
  };
}
