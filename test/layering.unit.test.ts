/**
 * The whole house, not only its core (docs/architecture.md, "Layers"): src's top-level
 * folders form no import cycle (type imports included), each imports only from its own
 * layer or those below, infrastructure never imports a role, and a role imports another
 * role only through the seams listed here, each a file the architecture doc names.
 * A failure prints the offending import, file → file.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Lowest first. A folder may import its own layer's folders (no cycle) and every layer below. */
const LAYERS: ReadonlyArray<{ name: string; folders: readonly string[] }> = [
  { name: 'data and utilities', folders: ['streams', 'lib'] },
  { name: 'domain core', folders: ['commands'] },
  // config: the values the entry point read once (`loadConfig`), passed down.
  { name: 'infrastructure', folders: ['config', 'nats', 'db', 'telemetry', 'scripts'] },
  { name: 'inbound pipeline', folders: ['inbound'] },
  { name: 'outbound sending', folders: ['dispatchers'] },
  { name: 'roles', folders: ['owners', 'projections', 'notifier', 'http', 'jobs', 'live', 'replay'] },
  { name: 'entry points', folders: ['runtime', 'cli'] },
];
const ROLES = new Set(LAYERS.find((l) => l.name === 'roles')!.folders);

/** The seams between roles: the only files one role may import from another. */
const SEAMS: Readonly<Record<string, readonly string[]>> = {
  http: [
    // Read-your-writes waits for the projector's position; the read models' own shapes.
    'src/projections/watermark.ts', 'src/projections/projector.ts', 'src/projections/attempt-rows.ts', 'src/projections/apply-event.ts',
    // GET /flow-control asks the task partition owners what they hold.
    'src/owners/flow-stats.ts',
    // GET /live: the live feeds and their messages.
    'src/live/feeds.ts', 'src/live/messages.ts',
    // POST /channels/{id}/test sends as the notifier would.
    'src/notifier/channels/send.ts', 'src/notifier/channels/message.ts',
  ],
  // The bulk jobs' worker waits for the projector's position before it reads the read models.
  jobs: ['src/projections/projector.ts'],
  replay: ['src/projections/projector.ts'],
};

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|(?:^|\n)\s*import\s*['"]([^'"]+)['"]/g;

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    return e.isDirectory() ? tsFiles(rel) : e.name.endsWith('.ts') ? [rel] : [];
  });
}

/** `src/<folder>/…` → folder; `src/config.ts` → `config`; `streams/…` → `streams`. */
function folderOf(file: string): string {
  const parts = file.split(path.sep);
  if (parts[0] !== 'src') return parts[0]!;
  return parts.length > 2 ? parts[1]! : parts[1]!.replace(/\.ts$/, '');
}

interface Edge {
  from: string;
  to: string;
  file: string;
  target: string;
}

function edges(): Edge[] {
  const out: Edge[] = [];
  for (const file of tsFiles('src')) {
    const text = readFileSync(path.join(root, file), 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const spec = (m[1] ?? m[2] ?? m[3])!;
      if (!spec.startsWith('.')) continue;
      const target = path.normalize(path.join(path.dirname(file), spec));
      const from = folderOf(file);
      const to = folderOf(target);
      if (from !== to) out.push({ from, to, file, target });
    }
  }
  return out;
}

const layerOf = (folder: string): number => LAYERS.findIndex((l) => l.folders.includes(folder));

/** Every cycle among folders, each as `a → b → … → a` with one import per step. */
function cycles(all: Edge[]): string[] {
  const next = new Map<string, Map<string, Edge>>();
  for (const e of all) {
    if (!next.has(e.from)) next.set(e.from, new Map());
    if (!next.get(e.from)!.has(e.to)) next.get(e.from)!.set(e.to, e);
  }
  const found = new Set<string>();
  const visit = (start: string, at: string, trail: Edge[]) => {
    for (const [to, edge] of next.get(at) ?? []) {
      if (to === start) {
        const ring = [...trail, edge];
        const names = ring.map((x) => x.from);
        const least = names.indexOf([...names].sort()[0]!);
        const rotated = [...ring.slice(least), ...ring.slice(0, least)];
        found.add(rotated.map((x) => `${x.from} (${x.file} → ${x.target})`).join(' → ') + ` → ${rotated[0]!.from}`);
      } else if (!trail.some((x) => x.from === to) && to > start) {
        visit(start, to, [...trail, edge]);
      }
    }
  };
  for (const start of [...next.keys()].sort()) visit(start, start, []);
  return [...found].sort();
}

function breaches(all: Edge[]): string[] {
  const out: string[] = [];
  for (const e of all) {
    const [from, to] = [layerOf(e.from), layerOf(e.to)];
    if (from < 0 || to < 0) {
      out.push(`${e.file} → ${e.target}: folder ${from < 0 ? e.from : e.to} is in no layer`);
    } else if (to > from) {
      out.push(`${e.file} → ${e.target}: ${LAYERS[from]!.name} (${e.from}) imports ${LAYERS[to]!.name} (${e.to})`);
    } else if (to === from && ROLES.has(e.from) && !SEAMS[e.from]?.includes(e.target)) {
      out.push(`${e.file} → ${e.target}: role ${e.from} imports role ${e.to} outside a named seam`);
    }
  }
  return out.sort();
}

test('src has no import cycle among its top-level folders (type imports included)', () => {
  assert.deepEqual(cycles(edges()), []);
});

test('each folder imports only its own layer and those below; a role another role only through a named seam', () => {
  assert.deepEqual(breaches(edges()), []);
});

test('every folder of src is in a layer, and every seam is a file that exists', () => {
  const folders = new Set(tsFiles('src').map(folderOf));
  assert.deepEqual([...folders].filter((f) => layerOf(f) < 0), []);
  const present = new Set(tsFiles('src'));
  assert.deepEqual(Object.values(SEAMS).flat().filter((f) => !present.has(f)), []);
});

test('the rule has teeth: an import upwards, a cycle and a role-to-role import are each found', () => {
  const fake: Edge[] = [
    { from: 'nats', to: 'owners', file: 'src/nats/x.ts', target: 'src/owners/y.ts' },
    { from: 'owners', to: 'nats', file: 'src/owners/y.ts', target: 'src/nats/x.ts' },
    { from: 'notifier', to: 'owners', file: 'src/notifier/z.ts', target: 'src/owners/y.ts' },
  ];
  assert.deepEqual(cycles(fake), ['nats (src/nats/x.ts → src/owners/y.ts) → owners (src/owners/y.ts → src/nats/x.ts) → nats']);
  const found = breaches(fake);
  assert.ok(found.some((b) => b.includes('infrastructure (nats) imports roles (owners)')), found.join('\n'));
  assert.ok(found.some((b) => b.includes('role notifier imports role owners outside a named seam')), found.join('\n'));
});
