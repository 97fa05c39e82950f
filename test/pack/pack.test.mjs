// `pnpm test:pack`: installs microbatch as a user would. Every public package is packed (`pnpm pack`), checked
// (what the tarball ships, `attw` on its types), installed with npm from the tarballs into projects under the OS temp
// folder (outside the workspace: no workspace links, no repository tsconfig), and exercised there: Express, Fastify
// and Hono from CommonJS and ESM, Koa, Nest 11 (CommonJS) and Nest 12 (ESM) answering batched requests, the READMEs'
// imports type-checked against the installed declarations (`.mts` and `.cts`), and the installed `microbatch` CLI
// serving the repository's bundled model on Express, Fastify and Hono to fetch and to the official `openai` client
// (`models.list()`, `completions.create()`).
//
// Run with node's test runner (`node --test`), after `pnpm build`. npm downloads go to one cache folder that
// later runs reuse (MICROBATCH_PACK_CACHE, default <tmp>/microbatch-pack-npm-cache); every step has a hang guard.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
const MODEL = join(ROOT, 'models', 'tinystories-656k');
/** Young runtime dependencies pinned to an exact version (the brief's rule); every other one is a caret range. */
const EXACT_PINS = new Set(['@mlc-ai/web-xgrammar']);
const CACHE = process.env.MICROBATCH_PACK_CACHE ?? join(tmpdir(), 'microbatch-pack-npm-cache');
const MINUTE = 60_000;

// npm runs with a clean environment: none of the npm_* variables pnpm sets for its own scripts (the machine's
// registry, proxy and certificate settings stay), a shared cache, and no onnxruntime-node post-install download (the
// CPU binaries ship in its npm package).
const KEEP =
  /^npm_config_(registry|.+:registry|proxy|https_proxy|http_proxy|noproxy|cafile|ca|strict_ssl|userconfig|globalconfig)$/i;
const ENV = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => KEEP.test(key) || !/^(npm_|pnpm_)/i.test(key)),
);
Object.assign(ENV, {
  npm_config_cache: CACHE,
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_update_notifier: 'false',
  npm_config_loglevel: 'error',
  ONNXRUNTIME_NODE_INSTALL: 'skip',
});

/** Runs a command to completion; rejects with its output when it fails or outlives `timeoutMs` (the hang guard). */
function run(command, args, { cwd, timeoutMs = 2 * MINUTE } = {}) {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { cwd, env: ENV, timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 << 20 },
      (error, stdout, stderr) => {
        if (error === null) resolve({ stdout, stderr });
        else
          reject(
            new Error(
              `\`${command} ${args.join(' ')}\` in ${cwd} failed (${error.killed ? `killed after ${timeoutMs} ms` : `exit ${error.code}`}):\n${stdout}\n${stderr}`.slice(
                -8_000,
              ),
            ),
          );
      },
    );
  });
}

let work;
let tarballDir;
/** Package name -> its tarball's path. */
const tarballs = new Map();
const projects = {};

/** Creates a project in the temp folder whose dependencies are `deps` plus the named microbatch tarballs. */
async function createProject(name, type, microbatch, deps) {
  const dir = join(work, name);
  await mkdir(dir, { recursive: true });
  const fromTarballs = Object.fromEntries(microbatch.map((pkg) => [pkg, `file:${tarballs.get(pkg)}`]));
  // Every microbatch package the installed ones depend on comes from its tarball, never from the registry.
  const overrides = Object.fromEntries([...tarballs.keys()].map((pkg) => [pkg, `file:${tarballs.get(pkg)}`]));
  const manifest = {
    name: `microbatch-pack-${name}`,
    private: true,
    type,
    dependencies: { ...deps, ...fromTarballs },
    overrides,
  };
  await writeFile(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  for (const file of await readdir(FIXTURES)) await copyFile(join(FIXTURES, file), join(dir, file));
  return dir;
}

/**
 * `npm install` in `dir`. `engineStrict`: a package (ours or any dependency) whose `engines` exclude this Node fails
 * the install (EBADENGINE as an error, not a warning nobody reads).
 */
async function npmInstall(dir, { engineStrict = false } = {}) {
  const args = ['install', '--no-package-lock', '--prefer-offline', '--no-audit', '--no-fund'];
  await run('npm', engineStrict ? [...args, '--engine-strict'] : args, { cwd: dir, timeoutMs: 8 * MINUTE });
}

/** Creates the three projects and installs them: started as soon as the tarballs exist, while attw runs. */
async function installProjects() {
  projects.web = await createProject(
    'web',
    'commonjs',
    ['@microbatch/core', '@microbatch/express', '@microbatch/koa', '@microbatch/fastify', '@microbatch/hono'],
    {
      express: '^5.1.0',
      koa: '^3.0.0',
      '@koa/router': '^15.0.0',
      '@koa/bodyparser': '^6.0.0',
      fastify: '^5.12.0',
      hono: '^4.13.0',
      '@hono/node-server': '^2.1.0',
    },
  );
  // The CommonJS project of the older majors: Nest 11, and Express 4 (Nest's own Express 5 nests below it).
  projects.nest11 = await createProject(
    'nest11',
    'commonjs',
    ['@microbatch/core', '@microbatch/nest', '@microbatch/express'],
    {
      express: '^4.21.0',
      '@nestjs/common': '^11.1.0',
      '@nestjs/core': '^11.1.0',
      '@nestjs/platform-express': '^11.1.0',
      'reflect-metadata': '^0.2.2',
      rxjs: '^7.8.0',
    },
  );
  // The CLI alone, as `npm install @microbatch/cli` gets it: serving, inference, Express and Koa; no Fastify, Hono
  // or Nest (optional peers: Fastify 5.12 pulls cookie@2 and Nest 12 file-type@22, which declare Node >= 22), nor
  // @microbatch/nats (an optional peer: @nats-io 3.4 pulls @nats-io/nuid@3, which declares Node >= 22).
  // Installed engine-strict on this Node.
  projects.cli = await createProject('cli', 'module', ['@microbatch/cli'], {});
  // Everything, with Nest 12 (ESM): the Nest 12 e2e, the READMEs' imports and the official `openai` client (openai@7
  // wants Node 22 too) run here.
  projects.full = await createProject(
    'full',
    'module',
    ['@microbatch/cli', '@microbatch/nest', '@microbatch/fastify', '@microbatch/hono', '@microbatch/nats'],
    {
      openai: '^7.0.0',
      fastify: '^5.12.0',
      hono: '^4.13.0',
      '@hono/node-server': '^2.1.0',
      '@nestjs/common': '^12.0.0',
      '@nestjs/core': '^12.0.0',
      '@nestjs/platform-express': '^12.0.0',
      'reflect-metadata': '^0.2.2',
      rxjs: '^7.8.0',
    },
  );
  // One after the other: they share the npm cache. Only the projects holding Fastify 5.12 (web, full) or Nest 12
  // (full) may hold a package declaring a newer Node: ours never do (the cli project is engine-strict).
  const strict = new Set(['nest11', 'cli']);
  for (const [name, dir] of Object.entries(projects)) await npmInstall(dir, { engineStrict: strict.has(name) });
}

let installing;

before(async () => {
  work = await mkdtemp(join(tmpdir(), 'microbatch-pack-'));
  tarballDir = join(work, 'tarballs');
  await mkdir(CACHE, { recursive: true });
});

after(async () => {
  if (process.env.MICROBATCH_PACK_KEEP) console.log(`kept ${work}`);
  else if (work !== undefined) await rm(work, { recursive: true, force: true });
});

void test(
  'every public package packs, ships only dist/ + README + LICENSE, with no workspace: ranges',
  { timeout: 3 * MINUTE },
  async () => {
    const names = [];
    const versions = new Map();
    for (const dir of await readdir(join(ROOT, 'packages'))) {
      const file = join(ROOT, 'packages', dir, 'package.json');
      if (!existsSync(file)) continue;
      const manifest = JSON.parse(await readFile(file, 'utf8'));
      if (manifest.private !== true) names.push(manifest.name);
      versions.set(manifest.name, manifest.version);
    }
    assert.ok(names.length >= 13, `public packages: ${names.join(', ')}`);
    const filters = names.flatMap((name) => ['--filter', name]);
    await run('pnpm', ['-r', ...filters, 'pack', '--pack-destination', tarballDir], {
      cwd: ROOT,
      timeoutMs: 2 * MINUTE,
    });
    for (const name of names) {
      const file = join(tarballDir, `${name.replace('@', '').replace('/', '-')}-${versions.get(name)}.tgz`);
      assert.ok(existsSync(file), `no tarball for ${name} in ${tarballDir}`);
      tarballs.set(name, file);
    }
    for (const [name, file] of tarballs) {
      const { stdout } = await run('tar', ['tzf', file], { cwd: work });
      const files = stdout
        .trim()
        .split('\n')
        .map((line) => line.replace(/^package\//, ''));
      for (const required of [
        'package.json',
        'LICENSE',
        'dist/index.js',
        'dist/index.cjs',
        'dist/index.d.ts',
        'dist/index.d.cts',
      ]) {
        assert.ok(files.includes(required), `${name} does not ship ${required}`);
      }
      const stray = files.filter(
        (path) => !/^(package\.json|README\.md|LICENSE|dist\/.+\.(js|cjs|d\.ts|d\.cts|js\.map|cjs\.map))$/.test(path),
      );
      assert.deepEqual(stray, [], `${name} ships files outside dist/`);
      assert.ok(
        !files.some((path) => /(^|\/)(worker\.cjs|testing\.d\.c?ts)$/.test(path)),
        `${name} ships a stray build file`,
      );
      // Every declaration has its twin in the other format.
      for (const path of files.filter((p) => p.endsWith('.d.ts')))
        assert.ok(files.includes(path.replace(/\.d\.ts$/, '.d.cts')), `${name}: ${path} has no .d.cts twin`);
      const { stdout: packed } = await run('tar', ['xzf', file, '-O', 'package/package.json'], { cwd: work });
      assert.doesNotMatch(packed, /workspace:/, `${name}'s packed package.json keeps a workspace: range`);
      const manifest = JSON.parse(packed);
      assert.equal(manifest.license, 'MIT', name);
      assert.equal(manifest.engines?.node, '>=20.19', name);
      assert.ok(manifest.repository?.url && manifest.keywords?.length > 0, `${name} lacks repository or keywords`);
      // Caret ranges, except the young dependencies pinned exactly on purpose (their patch releases change behaviour).
      for (const [dep, range] of Object.entries(manifest.dependencies ?? {})) {
        if (EXACT_PINS.has(dep))
          assert.match(range, /^\d+\.\d+\.\d+$/, `${name}: ${dep}@${range} is not pinned exactly`);
        else assert.match(range, /^\^/, `${name}: ${dep}@${range} is not a caret range`);
      }
    }
    installing = installProjects();
    installing.catch(() => {}); // reported by the install test
  },
);

void test(
  'attw finds no type problems in any tarball (import and require, every subpath)',
  { timeout: 5 * MINUTE },
  async () => {
    assert.ok(tarballs.size > 0, 'nothing was packed');
    const attw = join(ROOT, 'node_modules', '.bin', 'attw');
    const queue = [...tarballs.values()];
    const failures = [];
    // Two at a time: attw is CPU-bound and CI has two cores.
    await Promise.all(
      [0, 1].map(async () => {
        for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
          await run(attw, [file, '--format', 'ascii'], { cwd: work, timeoutMs: 2 * MINUTE }).catch((error) =>
            failures.push(error.message),
          );
        }
      }),
    );
    assert.deepEqual(failures, []);
  },
);

void test('the tarballs install with npm into projects outside the workspace', { timeout: 10 * MINUTE }, async () => {
  assert.ok(installing, 'nothing was packed');
  await installing;
  assert.ok(!existsSync(join(projects.cli, 'node_modules', '@microbatch', 'core', 'src')), 'sources were installed');
});

for (const [label, project, fixture] of [
  ['Express from CommonJS', 'web', 'express.cjs'],
  ['Express from ESM', 'web', 'express.mjs'],
  ['Express 4 from CommonJS', 'nest11', 'express.cjs'],
  ['Koa from ESM', 'web', 'koa.mjs'],
  ['Fastify from CommonJS', 'web', 'fastify.cjs'],
  ['Fastify from ESM', 'web', 'fastify.mjs'],
  ['Hono from CommonJS', 'web', 'hono.cjs'],
  ['Hono from ESM', 'web', 'hono.mjs'],
  ['Nest 11 from CommonJS', 'nest11', 'nest11.cjs'],
  ['Nest 12 from ESM', 'full', 'nest12.mjs'],
]) {
  void test(`${label}: concurrent requests share batches`, { timeout: MINUTE }, async () => {
    assert.ok(projects[project], `the ${project} project was not installed`);
    const { stdout } = await run(process.execPath, [fixture], { cwd: projects[project], timeoutMs: MINUTE });
    console.log(stdout.trim());
  });
}

void test(
  "the READMEs' imports type-check against the installed declarations, from ESM and from CommonJS",
  { timeout: 2 * MINUTE },
  async () => {
    assert.ok(projects.full, 'the full project was not installed');
    const readmes = [join(ROOT, 'README.md')];
    for (const dir of await readdir(join(ROOT, 'packages'))) {
      if (existsSync(join(ROOT, 'packages', dir, 'README.md'))) readmes.push(join(ROOT, 'packages', dir, 'README.md'));
    }
    // The guides' examples moved out of the README: their imports are checked the same way.
    for (const name of await readdir(join(ROOT, 'docs'))) {
      if (name.endsWith('.md')) readmes.push(join(ROOT, 'docs', name));
    }
    const lines = [];
    let count = 0;
    for (const readme of readmes) {
      for (const [, names, from] of (await readFile(readme, 'utf8')).matchAll(
        /import\s*(?:type\s+)?\{([^}]*)\}\s*from\s*'(@microbatch\/[^']+)'/g,
      )) {
        // Each name imported under a fresh alias: the same name comes from several packages (batchRoute).
        const specifiers = names
          .split(',')
          .map((name) => name.trim())
          .filter(Boolean)
          .map((name) => {
            const [, type = '', original] = /^(type\s+)?([\w$]+)/.exec(name);
            count += 1;
            return `${type}${original} as _${count}`;
          });
        lines.push(`import { ${specifiers.join(', ')} } from '${from}';`);
      }
    }
    assert.ok(count > 10, `only ${count} imported names found in the READMEs`);
    const source = `${lines.join('\n')}\nexport {};\n`;
    await writeFile(join(projects.full, 'docs-imports.mts'), source);
    await writeFile(join(projects.full, 'docs-imports.cts'), source);
    const tsconfig = {
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        strict: true,
        skipLibCheck: true,
        noEmit: true,
        types: [],
      },
      files: ['docs-imports.mts', 'docs-imports.cts'],
    };
    await writeFile(join(projects.full, 'tsconfig.json'), JSON.stringify(tsconfig));
    await run(join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', join(projects.full, 'tsconfig.json')], {
      cwd: projects.full,
      timeoutMs: MINUTE,
    });
    console.log(`${count} names imported by the READMEs resolve for import and require`);
  },
);

void test(
  'the installed CLI: `microbatch serve --help`, then a completion on the bundled model from each framework',
  { timeout: 6 * MINUTE },
  async () => {
    assert.ok(projects.cli, 'the cli project was not installed');
    const bin = join(projects.cli, 'node_modules', '.bin', 'microbatch');
    const help = await run('npx', ['--no-install', 'microbatch', 'serve', '--help'], {
      cwd: projects.cli,
      timeoutMs: MINUTE,
    });
    assert.match(help.stdout, /--model/);
    const { version } = JSON.parse(await readFile(join(ROOT, 'packages', 'cli', 'package.json'), 'utf8'));
    assert.equal((await run(bin, ['--version'], { cwd: projects.cli })).stdout.trim(), version);
    // Nest is an optional peer of the CLI: without it, `--framework nest` says what to install, and nothing else
    // loads it (the serve below is Express).
    const nest = await run(bin, ['serve', '--model', MODEL, '--framework', 'nest', '--port', '0'], {
      cwd: projects.cli,
      timeoutMs: MINUTE,
    }).then(
      () => assert.fail('--framework nest started without Nest installed'),
      (error) => error.message,
    );
    assert.match(nest, /--framework nest needs @microbatch\/nest @nestjs\/common @nestjs\/core/);
    // esbuild's renamed classes (`_BatchError`) would show in logs: the builds keep the names.
    const names = await run(
      process.execPath,
      [
        '-e',
        "import('@microbatch/core').then((m) => console.log(new m.BatchError('INVALID_INPUT', 'x').stack.split('\\n')[0], require('@microbatch/core').BatchError.name))",
      ],
      { cwd: projects.cli },
    );
    assert.equal(names.stdout.trim(), 'BatchError: x BatchError');
    // Installed, the repository's bundled model is not there: a clear error that says what to pass instead.
    const bundled = await run(
      process.execPath,
      ['-e', "import('@microbatch/serving').then((s) => s.bundledModelDir()).catch((e) => console.log(e.message))"],
      { cwd: projects.cli },
    );
    assert.match(bundled.stdout, /--model/, `bundledModelDir() once installed: ${bundled.stdout}`);
    assert.doesNotMatch(bundled.stdout, /^\//, 'bundledModelDir() returned a path that does not exist');
    const missing = await run(bin, ['serve', '--model', join(work, 'no-such-model'), '--port', '0'], {
      cwd: projects.cli,
      timeoutMs: MINUTE,
    }).then(
      () => assert.fail('serving a missing model folder succeeded'),
      (error) => error.message,
    );
    assert.match(missing, /exit 1/);
    assert.match(missing, /no-such-model/);
    assert.ok(existsSync(MODEL), `the bundled model is missing: ${MODEL} (pnpm install copies it)`);
    // The same app on three frameworks, each to fetch and to the official client.
    // Express from the CLI alone; Fastify and Hono (optional peers) from the project that installed them.
    for (const framework of ['express', 'fastify', 'hono']) {
      const args = ['serve', '--model', MODEL, '--port', '0', '--host', '127.0.0.1', '--framework', framework];
      const cwd = framework === 'express' ? projects.cli : projects.full;
      const child = spawn(join(cwd, 'node_modules', '.bin', 'microbatch'), args, {
        cwd,
        env: ENV,
      });
      let output = '';
      child.stdout.on('data', (chunk) => (output += chunk));
      child.stderr.on('data', (chunk) => (output += chunk));
      const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
      try {
        const base = await new Promise((resolve, reject) => {
          const poll = setInterval(() => {
            const url = /http:\/\/127\.0\.0\.1:\d+/.exec(output)?.[0];
            if (url === undefined) return;
            void fetch(`${url}/readyz`)
              .then(
                (r) => r.ok,
                () => false,
              )
              .then((ready) => {
                if (ready) {
                  clearInterval(poll);
                  resolve(url);
                }
              });
          }, 200);
          void exited.then(({ code }) => {
            clearInterval(poll);
            reject(new Error(`microbatch serve exited (${code}) before it was ready:\n${output}`));
          });
        });
        const response = await fetch(`${base}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8 }),
        });
        const body = await response.json();
        assert.equal(response.status, 200, JSON.stringify(body));
        assert.equal(typeof body.choices?.[0]?.text, 'string', JSON.stringify(body));
        assert.ok(body.choices[0].text.length > 0, JSON.stringify(body));
        console.log(`cli (${framework}): completion ${JSON.stringify(body.choices[0].text)}`);
        // What the official client sees: the served model listed, and a completion from it.
        const { stdout } = await run(process.execPath, ['openai-client.mjs', base], {
          cwd: projects.full,
          timeoutMs: MINUTE,
        });
        const seen = JSON.parse(stdout);
        assert.equal(seen.models.length, 1, stdout);
        assert.ok(typeof seen.text === 'string' && seen.text.length > 0, stdout);
        console.log(
          `openai client (${framework}): models ${JSON.stringify(seen.models)}, completion ${JSON.stringify(seen.text)}`,
        );
      } finally {
        child.kill('SIGTERM');
        const { code } = await exited;
        assert.equal(code, 0, `microbatch serve --framework ${framework} did not exit 0 on SIGTERM:\n${output}`);
      }
    }
  },
);
