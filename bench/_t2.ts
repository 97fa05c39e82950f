import { createWorkerPool } from '@microbatch/inference';
for (const scheduling of ['continuous', 'request'] as const) {
  const pool = createWorkerPool({ runner: { task: 'text-generation', model: process.argv[2]!, scheduling } });
  await pool.ready;
  const out = await pool.handler([{ prompt: 'Once upon a time', max_new_tokens: 12, temperature: 0 }, { prompt: 'Lily saw a big red ball under a tree and', max_new_tokens: 12, temperature: 0 }], { signal: new AbortController().signal } as never);
  console.log(scheduling, JSON.stringify(out));
  await pool.close();
}
