/**
 * The docs name the code they describe: every inline code span of `README.md`,
 * `bench/README.md` and `docs/*.md` that is a repository path (`src/…`, `test/…`,
 * `bench/…`, `streams/…`, `console/…`, `scripts/…`, `examples/…`, `docs/…`) must exist,
 * and every link from one of these pages to a heading of another (`page.md#anchor`) must
 * find that heading. A `:line` or `#anchor` suffix is dropped before the path is looked
 * up; `<name>`, `*` and `…` stand for any text within one path segment, `**` for any
 * depth, and such a path must match at least one file or folder. Fenced blocks are
 * examples and commands: not checked. A failure prints each page and path at fault.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROOTS = ['src', 'test', 'bench', 'streams', 'console', 'scripts', 'examples', 'docs'];
/** Written by runs, never committed (bench/results/.gitignore): only the folder that holds them must exist. */
const RESULTS = 'bench/results/';
const GENERATED = ['logs/', 'profiles/'].map((d) => RESULTS + d);
const generatedHome = (rel: string): string | undefined => (GENERATED.some((g) => rel.startsWith(g)) ? RESULTS : undefined);
const PATH_SPAN = new RegExp(`^(?:${ROOTS.join('|')})/\\S*$`);

/** The pages checked, relative to the repository. */
function pages(): string[] {
  const docs = readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);
  return ['README.md', 'bench/README.md', ...docs.sort()].filter((p) => existsSync(path.join(root, p)));
}

/** A page's text outside fenced code blocks, each line with its number. */
function proseLines(text: string): Array<{ line: number; text: string }> {
  const out: Array<{ line: number; text: string }> = [];
  let fence: string | null = null;
  text.split('\n').forEach((line, i) => {
    const opens = /^\s*(```|~~~)/.exec(line);
    if (opens) {
      if (fence === null) fence = opens[1]!;
      else if (line.trim().startsWith(fence)) fence = null;
      return;
    }
    if (fence === null) out.push({ line: i + 1, text: line });
  });
  return out;
}

/** The inline code spans of one line (single or double backticks). */
function codeSpans(line: string): string[] {
  return [...line.matchAll(/(`+)([^`]+?)\1(?!`)/g)].map((m) => m[2]!.trim());
}

/** `src/foo.ts:12`, `src/foo.ts:12-30`, `docs/x.md#anchor` → the path alone. */
export function stripSuffix(span: string): string {
  return span.replace(/#.*$/, '').replace(/:\d+(?:-\d+)?$/, '');
}

const segmentPattern = (segment: string): RegExp =>
  new RegExp(`^${segment.split(/(<[^>]+>|\*|…)/).map((part) => (/^(<[^>]+>|\*|…)$/.test(part) ? '.*' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))).join('')}$`);

/** Whether `rel` (a path, maybe with placeholders) names at least one file or folder of the repository. */
export function exists(rel: string): boolean {
  const segments = rel.split('/').filter(Boolean);
  const wantsDir = rel.endsWith('/');
  const walk = (dir: string, rest: string[]): boolean => {
    if (rest.length === 0) return !wantsDir || statSync(dir).isDirectory();
    const [head, ...tail] = rest as [string, ...string[]];
    if (head === '**') {
      if (walk(dir, tail)) return true;
      return subdirs(dir).some((d) => walk(path.join(dir, d), rest));
    }
    if (!/[<*…]/.test(head)) {
      const next = path.join(dir, head);
      return existsSync(next) && (tail.length === 0 || statSync(next).isDirectory()) && walk(next, tail);
    }
    const pattern = segmentPattern(head);
    return entries(dir).some((e) => pattern.test(e) && (tail.length === 0 || statSync(path.join(dir, e)).isDirectory()) && walk(path.join(dir, e), tail));
  };
  return walk(root, segments);
}

const entries = (dir: string): string[] => (existsSync(dir) && statSync(dir).isDirectory() ? readdirSync(dir).filter((e) => e !== 'node_modules') : []);
const subdirs = (dir: string): string[] => entries(dir).filter((e) => statSync(path.join(dir, e)).isDirectory());

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens; a repeat gets `-1`, `-2`, …. */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const { text } of proseLines(markdown)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text);
    if (!m) continue;
    const base = m[1]!.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

test('every path a doc names in backticks exists', () => {
  const missing: string[] = [];
  for (const page of pages()) {
    for (const { line, text } of proseLines(readFileSync(path.join(root, page), 'utf8'))) {
      for (const span of codeSpans(text)) {
        if (!PATH_SPAN.test(span)) continue;
        const rel = stripSuffix(span);
        if (!exists(generatedHome(rel) ?? rel)) missing.push(`${page}:${line}: \`${span}\``);
      }
    }
  }
  assert.deepEqual(missing, [], `paths named in the docs that do not exist:\n${missing.join('\n')}`);
});

test('every link from one doc to a heading of another finds that heading', () => {
  const broken: string[] = [];
  for (const page of pages()) {
    for (const { line, text } of proseLines(readFileSync(path.join(root, page), 'utf8'))) {
      for (const m of text.matchAll(/\]\(([^)\s]*?\.md)#([^)\s]+)\)/g)) {
        const target = path.normalize(path.join(path.dirname(page), m[1]!));
        const file = path.join(root, target);
        if (!existsSync(file)) {
          broken.push(`${page}:${line}: ${m[1]}#${m[2]} (no such page)`);
          continue;
        }
        if (!anchorsOf(readFileSync(file, 'utf8')).has(decodeURIComponent(m[2]!))) broken.push(`${page}:${line}: ${m[1]}#${m[2]} (no such heading in ${target})`);
      }
      // A link within the page itself.
      for (const m of text.matchAll(/\]\(#([^)\s]+)\)/g)) {
        if (!anchorsOf(readFileSync(path.join(root, page), 'utf8')).has(decodeURIComponent(m[1]!))) broken.push(`${page}:${line}: #${m[1]} (no such heading)`);
      }
    }
  }
  assert.deepEqual(broken, [], `links to headings that do not exist:\n${broken.join('\n')}`);
});

test('the checks have teeth: a missing path, a placeholder and an anchor', () => {
  assert.equal(exists('src/commands/execution/decide.ts'), true);
  assert.equal(exists('src/commands/execution/no-such-file.ts'), false);
  assert.equal(exists('src/commands/<aggregate>/decide.ts'), true);
  assert.equal(exists('src/commands/<aggregate>/no-such-file.ts'), false);
  assert.equal(exists('src/**/owned-tasks.ts'), true);
  assert.equal(exists('src/owners/'), true);
  assert.equal(exists('src/owners/task-owner.ts/'), false);
  assert.equal(stripSuffix('src/owners/task-owner.ts:120-140'), 'src/owners/task-owner.ts');
  assert.equal(generatedHome('bench/results/logs/<name>.service.log'), 'bench/results/');
  assert.equal(generatedHome('bench/results/latest.md'), undefined);
  assert.equal(stripSuffix('docs/architecture.md#the-shape'), 'docs/architecture.md');
  assert.deepEqual([...anchorsOf('# A `b` (c; d=0)\n## A `b` (c; d=0)\n```\n# not a heading\n```\n')], ['a-b-c-d0', 'a-b-c-d0-1']);
});
