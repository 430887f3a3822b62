/**
 * A strict reader of the Prometheus text exposition format 0.0.4 (what `GET /metrics`
 * serves), for tests: it throws, naming the line, on anything a Prometheus server
 * would refuse or read differently (prom-client writes this format but has no reader).
 * Checked: line syntax, names, label escapes, values; `# TYPE` at most once per family
 * and before its samples; a family's lines together; no series twice; counters not
 * negative; histograms with `le` buckets in order, cumulative, a `+Inf` bucket equal to
 * `_count`, and a `_sum`.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string | undefined;
  samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** As Go's strconv.ParseFloat (what Prometheus uses) reads it: NaN and Inf in any case (prom-client writes `Nan`). */
function parseValue(text: string, where: string): number {
  if (/^nan$/i.test(text)) return NaN;
  const inf = /^([+-]?)inf(inity)?$/i.exec(text);
  if (inf) return inf[1] === '-' ? -Infinity : Infinity;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) throw new Error(`${where}: "${text}" is not a sample value`);
  return Number(text);
}

/** `{a="x",b="y\"z"}` from position `i` of `line` (at the `{`): the labels and where they end. */
function parseLabels(line: string, i: number, where: string): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  i++;
  for (;;) {
    if (line[i] === '}') return { labels, end: i + 1 };
    const eq = line.indexOf('=', i);
    if (eq < 0) throw new Error(`${where}: a label without "="`);
    const name = line.slice(i, eq);
    if (!LABEL_NAME.test(name)) throw new Error(`${where}: bad label name "${name}"`);
    if (name in labels) throw new Error(`${where}: label ${name} twice`);
    if (line[eq + 1] !== '"') throw new Error(`${where}: label ${name}'s value is not quoted`);
    let value = '';
    let j = eq + 2;
    for (;; j++) {
      const c = line[j];
      if (c === undefined) throw new Error(`${where}: label ${name}'s value is not closed`);
      if (c === '"') break;
      if (c === '\\') {
        const next = line[++j];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`${where}: bad escape \\${next ?? ''} in label ${name}`);
      } else value += c;
    }
    labels[name] = value;
    i = j + 1;
    if (line[i] === ',') i++;
    else if (line[i] !== '}') throw new Error(`${where}: expected "," or "}" after label ${name}`);
  }
}

/** HELP text escapes only `\\` and `\n`. */
function unescapeHelp(text: string, where: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = text[++i];
    if (next === 'n') out += '\n';
    else if (next === '\\') out += '\\';
    else throw new Error(`${where}: bad escape in HELP`);
  }
  return out;
}

function familyOf(sample: string, types: Map<string, MetricType>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sample.endsWith(suffix)) continue;
    const base = sample.slice(0, -suffix.length);
    const t = types.get(base);
    if (t === 'histogram' || (t === 'summary' && suffix !== '_bucket')) return base;
  }
  return sample;
}

const seriesKey = (s: Sample) => `${s.name}{${Object.entries(s.labels).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',')}}`;

export function parsePrometheusText(text: string): Map<string, Family> {
  if (text.length > 0 && !text.endsWith('\n')) throw new Error('the text does not end with a newline');
  const families = new Map<string, Family>();
  const types = new Map<string, MetricType>();
  const closed = new Set<string>();
  const series = new Set<string>();
  let current: string | undefined;
  const family = (name: string): Family => {
    let f = families.get(name);
    if (!f) families.set(name, (f = { name, type: types.get(name) ?? 'untyped', help: undefined, samples: [] }));
    return f;
  };
  // A family's lines (HELP, TYPE, samples) must come together.
  const enter = (name: string, where: string) => {
    if (current === name) return;
    if (closed.has(name)) throw new Error(`${where}: lines of ${name} are not together`);
    if (current !== undefined) closed.add(current);
    current = name;
  };

  text.slice(0, -1).split('\n').forEach((line, n) => {
    const where = `line ${n + 1} (${JSON.stringify(line.slice(0, 80))})`;
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(line);
      if (!m) return; // a comment
      const [, kind, name, rest = ''] = m;
      if (!METRIC_NAME.test(name!)) throw new Error(`${where}: bad metric name`);
      enter(name!, where);
      const f = family(name!);
      if (kind === 'HELP') {
        if (f.help !== undefined) throw new Error(`${where}: second HELP for ${name}`);
        f.help = unescapeHelp(rest, where);
      } else {
        if (types.has(name!)) throw new Error(`${where}: second TYPE for ${name}`);
        if (f.samples.length) throw new Error(`${where}: TYPE after samples of ${name}`);
        if (!TYPES.has(rest as MetricType)) throw new Error(`${where}: unknown type "${rest}"`);
        types.set(name!, rest as MetricType);
        f.type = rest as MetricType;
      }
      return;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) throw new Error(`${where}: not a sample`);
    const name = line.slice(0, nameEnd);
    if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name`);
    let labels: Record<string, string> = {};
    let i = nameEnd;
    if (line[i] === '{') ({ labels, end: i } = parseLabels(line, i, where));
    if (line[i] !== ' ') throw new Error(`${where}: expected a space before the value`);
    const parts = line.slice(i + 1).split(' ');
    if (parts.length > 2 || parts.some((p) => p === '')) throw new Error(`${where}: expected "value [timestamp]"`);
    const value = parseValue(parts[0]!, where);
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) throw new Error(`${where}: bad timestamp`);
    const familyName = familyOf(name, types);
    enter(familyName, where);
    const f = family(familyName);
    const sample = { name, labels, value };
    const key = seriesKey(sample);
    if (series.has(key)) throw new Error(`${where}: series ${key} twice`);
    series.add(key);
    if (f.type === 'counter' && !(value >= 0)) throw new Error(`${where}: a counter must not be negative or NaN`);
    if (f.type === 'histogram' && name.endsWith('_bucket') && labels.le === undefined) throw new Error(`${where}: a bucket without le`);
    f.samples.push(sample);
  });

  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

function checkHistogram(f: Family): void {
  const groups = new Map<string, { buckets: Array<[number, number]>; sum?: number; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = seriesKey({ name: '', labels: rest, value: 0 });
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { buckets: [] }));
    if (s.name === `${f.name}_bucket`) g.buckets.push([parseValue(le!, `${f.name} bucket`), s.value]);
    else if (s.name === `${f.name}_sum`) g.sum = s.value;
    else if (s.name === `${f.name}_count`) g.count = s.value;
    else throw new Error(`${f.name}: sample ${s.name} is not part of a histogram`);
  }
  for (const [key, g] of groups) {
    const what = `${f.name}${key}`;
    if (g.sum === undefined || g.count === undefined) throw new Error(`${what}: _sum or _count missing`);
    for (let i = 1; i < g.buckets.length; i++) {
      if (!(g.buckets[i]![0] > g.buckets[i - 1]![0])) throw new Error(`${what}: buckets not in increasing le order`);
      if (g.buckets[i]![1] < g.buckets[i - 1]![1]) throw new Error(`${what}: bucket counts not cumulative`);
    }
    const last = g.buckets.at(-1);
    if (!last || last[0] !== Infinity) throw new Error(`${what}: no +Inf bucket`);
    if (last[1] !== g.count) throw new Error(`${what}: the +Inf bucket (${last[1]}) differs from _count (${g.count})`);
  }
}

/** The value of the one sample `name` with exactly these labels (`le` included for buckets), or undefined. */
export function sampleValue(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = seriesKey({ name, labels, value: 0 });
  for (const f of families.values()) for (const s of f.samples) if (seriesKey(s) === want) return s.value;
  return undefined;
}
