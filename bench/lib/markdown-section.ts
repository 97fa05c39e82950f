// The generated sections of BENCHMARKS.md: each benchmark owns the text between its two markers and rewrites it.
import { readFile, writeFile } from 'node:fs/promises';

/** A generated section: its markers, and the heading it gets when it is added for the first time. */
export interface SectionMarkers {
  readonly start: string;
  readonly end: string;
  readonly heading: string;
}

/**
 * Where a section goes the first time, given the file's text and the block to add (heading and markers); at the end
 * of the file unless told otherwise.
 */
export type Placement = (text: string, block: string) => string;

const atEnd: Placement = (text, block) => `${text.trimEnd()}\n\n${block}`;

/**
 * Replaces the text between the section's markers in `path` with `body`, or adds the section (heading, markers and
 * body) where `place` says when the markers are not there yet.
 *
 * @example
 * ```ts
 * await writeSection(BENCHMARKS_MD, { start: '<!-- x:start -->', end: '<!-- x:end -->', heading: '## X' }, markdown);
 * ```
 */
export async function writeSection(
  path: string | URL,
  markers: SectionMarkers,
  body: string,
  place: Placement = atEnd,
): Promise<void> {
  const text = await readFile(path, 'utf8');
  const section = `${markers.start}\n\n${body}\n\n${markers.end}`;
  const start = text.indexOf(markers.start);
  const end = text.indexOf(markers.end);
  const updated =
    start !== -1 && end > start
      ? text.slice(0, start) + section + text.slice(end + markers.end.length)
      : place(text, `${markers.heading}\n\n${section}\n`);
  await writeFile(path, updated);
}
