/** Percentiles and plain-text / markdown tables for the benchmark reports. */

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  // Nearest-rank: the smallest value with at least p% of the samples at or below it.
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export interface Summary {
  n: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export function summarize(values: readonly number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  const mean = s.length ? s.reduce((a, b) => a + b, 0) / s.length : NaN;
  return { n: s.length, min: s[0] ?? NaN, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[s.length - 1] ?? NaN, mean };
}

export const fmt = {
  int: (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–'),
  rate: (n: number) => (Number.isFinite(n) ? `${Math.round(n).toLocaleString('en-US')}/s` : '–'),
  ms: (n: number) => (Number.isFinite(n) ? `${n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US')} ms` : '–'),
  s: (n: number) => (Number.isFinite(n) ? `${n.toFixed(2)} s` : '–'),
  pct: (n: number) => (Number.isFinite(n) ? `${n.toFixed(1)}%` : '–'),
  frac: (n: number) => (Number.isFinite(n) ? n.toFixed(3) : '–'),
};

export type Table = { headers: string[]; rows: string[][] };

export function textTable(t: Table): string {
  const widths = t.headers.map((h, i) => Math.max(h.length, ...t.rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ').trimEnd();
  return [line(t.headers), widths.map((w) => '-'.repeat(w)).join('  '), ...t.rows.map(line)].join('\n');
}

export function markdownTable(t: Table): string {
  const esc = (c: string) => c.replace(/\|/g, '\\|');
  return [
    `| ${t.headers.map(esc).join(' | ')} |`,
    `|${t.headers.map((_, i) => (i === 0 ? ' --- ' : ' ---: ')).join('|')}|`,
    ...t.rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
}
