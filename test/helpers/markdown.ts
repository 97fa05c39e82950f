// Reading the repository's markdown as its tests check it: code blocks, relative links and the headings they point
// at (GitHub's anchors), `@microbatch/*` imports and `microbatch serve|worker` command lines.
import { stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** A fenced code block: its info string's language (`ts`, `sh`, `text`, or `''`) and its text. */
export interface CodeBlock {
  readonly lang: string;
  readonly body: string;
}

/** One `import { a, type B } from '@microbatch/...'` of a TypeScript block. */
export interface PackageImport {
  readonly from: string;
  /** Value names only: type-only names are checked by `pnpm test:pack`, against the packed declarations. */
  readonly names: readonly string[];
}

const FENCE = /^```([\w-]*)[^\n]*\n([\s\S]*?)^```[ \t]*$/gm;

/**
 * The fenced code blocks of a markdown text, in order (indented fences of list items included).
 *
 * @example
 * ```ts
 * codeBlocks('```sh\npnpm test\n```\n'); // [{ lang: 'sh', body: 'pnpm test\n' }]
 * ```
 */
export function codeBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  for (const [, lang = '', body = ''] of dedentFences(markdown).matchAll(FENCE)) blocks.push({ lang, body });
  return blocks;
}

/** List items indent their fences; dedent each fenced block to its fence's column so FENCE sees every one. */
function dedentFences(markdown: string): string {
  const out: string[] = [];
  let indent: string | undefined;
  for (const line of markdown.split('\n')) {
    const fence = /^(\s*)```/.exec(line);
    if (indent === undefined && fence !== null) {
      indent = fence[1] ?? '';
      out.push(line.slice(indent.length));
    } else if (indent !== undefined) {
      out.push(line.startsWith(indent) ? line.slice(indent.length) : line);
      if (fence !== null) indent = undefined;
    } else {
      out.push(line);
    }
  }
  return out.join('\n');
}

/** The text outside fenced blocks, so a `#` comment of a shell block is no heading. */
function withoutFences(markdown: string): string {
  return dedentFences(markdown).replaceAll(FENCE, '');
}

/** The text outside code: inline code spans blanked too, so a link written as code is not a link. */
function prose(markdown: string): string {
  return withoutFences(markdown).replaceAll(/`[^`\n]*`/g, '');
}

/**
 * The targets of the links and images of a markdown text that stay in the repository: not `http(s):`, `mailto:`.
 *
 * @example
 * ```ts
 * relativeLinks('[core](packages/core/README.md#options), [site](https://example.org)'); // ['packages/core/README.md#options']
 * ```
 */
export function relativeLinks(markdown: string): string[] {
  const targets: string[] = [];
  for (const [, target = ''] of prose(markdown).matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)) {
    if (!/^[a-z][a-z+.-]*:/i.test(target)) targets.push(target);
  }
  return targets;
}

/**
 * The anchors GitHub gives a markdown text's headings: lower case, punctuation dropped, spaces as `-`, a repeated
 * one suffixed `-1`, `-2`...
 *
 * @example
 * ```ts
 * headingAnchors('## `microbatch serve`\n### Tracing (OpenTelemetry)'); // Set { 'microbatch-serve', 'tracing-opentelemetry' }
 * ```
 */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading = ''] of withoutFences(markdown).matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const slug = heading
      .toLowerCase()
      .replaceAll(/[^\p{L}\p{N}\s_-]/gu, '')
      .trim()
      .replaceAll(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/**
 * The relative links of the markdown file at `path` that lead nowhere: a file or folder that does not exist, or a
 * `#heading` that the target markdown file (or this one) does not have. Each is named as written.
 *
 * @example
 * ```ts
 * await brokenLinks('/repo/README.md', '[gone](docs/gone.md)', read); // ['docs/gone.md']
 * ```
 */
export async function brokenLinks(
  path: string,
  markdown: string,
  read: (path: string) => Promise<string>,
): Promise<string[]> {
  const broken: string[] = [];
  for (const link of relativeLinks(markdown)) {
    const [file = '', anchor] = link.split('#', 2);
    const target = file === '' ? path : join(dirname(path), decodeURIComponent(file));
    const kind = await stat(target).then(
      (stats) => (stats.isFile() ? 'file' : 'folder'),
      () => undefined,
    );
    if (kind === undefined) broken.push(link);
    else if (anchor !== undefined && (kind !== 'file' || !target.endsWith('.md'))) broken.push(link);
    else if (anchor !== undefined && !headingAnchors(target === path ? markdown : await read(target)).has(anchor)) {
      broken.push(link);
    }
  }
  return broken;
}

/**
 * The `@microbatch/*` value imports of a markdown text's TypeScript blocks.
 *
 * @example
 * ```ts
 * packageImports("```ts\nimport { otelTracer } from '@microbatch/core/otel';\n```\n"); // [{ from: '@microbatch/core/otel', names: ['otelTracer'] }]
 * ```
 */
export function packageImports(markdown: string): PackageImport[] {
  const imports: PackageImport[] = [];
  for (const { lang, body } of codeBlocks(markdown)) {
    if (lang !== 'ts') continue;
    for (const [, list = '', from = ''] of body.matchAll(/^import\s+\{([^}]*)\}\s*from\s*'(@microbatch\/[^']+)'/gm)) {
      const names = list
        .split(',')
        .map((name) => name.trim())
        .filter((name) => name !== '' && !name.startsWith('type '))
        .map((name) => name.split(/\s+as\s+/)[0] ?? name);
      imports.push({ from, names });
    }
  }
  return imports;
}

/**
 * The `microbatch serve` / `microbatch worker` command lines of a markdown text's code blocks (shell lines, and
 * comments of other blocks), continuation lines joined, as argument lists after `microbatch`: shell comments and
 * anything after the command's last flag value dropped.
 *
 * @example
 * ```ts
 * microbatchCommands('```sh\npnpm microbatch serve --model m \\\n  --port 0   # any port\n```\n'); // [['serve', '--model', 'm', '--port', '0']]
 * ```
 */
export function microbatchCommands(markdown: string): string[][] {
  const commands: string[][] = [];
  for (const { body } of codeBlocks(markdown)) {
    for (const line of body.replaceAll(/\\\n\s*/g, ' ').split('\n')) {
      const match = /(?:^|\s)microbatch\s+((?:serve|worker)\b.*)$/.exec(line);
      if (match === null) continue;
      // A shell comment after the command (`# or express, ...`) is no argument.
      const command = (match[1] ?? '').replace(/\s+#.*$/, '').trim();
      commands.push(command.split(/\s+/));
    }
  }
  return commands;
}
