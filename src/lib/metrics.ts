/** A small Prometheus registry: counters, gauges and histograms rendered as text format. */
type Labels = Record<string, string | number>;

function key(labels: Labels): string {
  return Object.entries(labels).map(([k, v]) => `${k}="${String(v).replace(/["\\\n]/g, '_')}"`).join(',');
}

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class Metrics {
  private counters = new Map<string, { help: string; values: Map<string, number> }>();
  private gauges = new Map<string, { help: string; read: () => number }>();
  private labeledGauges = new Map<string, { help: string; read: () => Array<[Labels, number]> }>();
  private histograms = new Map<string, { help: string; values: Map<string, { counts: number[]; sum: number; count: number }> }>();

  inc(name: string, help: string, labels: Labels = {}, by = 1): void {
    let c = this.counters.get(name);
    if (!c) this.counters.set(name, (c = { help, values: new Map() }));
    const k = key(labels);
    c.values.set(k, (c.values.get(k) ?? 0) + by);
  }

  gauge(name: string, help: string, read: () => number): void {
    this.gauges.set(name, { help, read });
  }

  /** A gauge with one series per label set, read at render time. */
  labeledGauge(name: string, help: string, read: () => Array<[Labels, number]>): void {
    this.labeledGauges.set(name, { help, read });
  }

  observe(name: string, help: string, seconds: number, labels: Labels = {}): void {
    let h = this.histograms.get(name);
    if (!h) this.histograms.set(name, (h = { help, values: new Map() }));
    const k = key(labels);
    let v = h.values.get(k);
    if (!v) h.values.set(k, (v = { counts: BUCKETS.map(() => 0), sum: 0, count: 0 }));
    for (let i = 0; i < BUCKETS.length; i++) if (seconds <= BUCKETS[i]!) v.counts[i]!++;
    v.sum += seconds;
    v.count++;
  }

  render(): string {
    const out: string[] = [];
    for (const [name, c] of this.counters) {
      out.push(`# HELP ${name} ${c.help}`, `# TYPE ${name} counter`);
      for (const [k, v] of c.values) out.push(`${name}${k ? `{${k}}` : ''} ${v}`);
    }
    for (const [name, g] of this.gauges) {
      out.push(`# HELP ${name} ${g.help}`, `# TYPE ${name} gauge`, `${name} ${g.read()}`);
    }
    for (const [name, g] of this.labeledGauges) {
      out.push(`# HELP ${name} ${g.help}`, `# TYPE ${name} gauge`);
      for (const [labels, v] of g.read()) {
        const k = key(labels);
        out.push(`${name}${k ? `{${k}}` : ''} ${v}`);
      }
    }
    for (const [name, h] of this.histograms) {
      out.push(`# HELP ${name} ${h.help}`, `# TYPE ${name} histogram`);
      for (const [k, v] of h.values) {
        const sep = k ? `${k},` : '';
        BUCKETS.forEach((b, i) => out.push(`${name}_bucket{${sep}le="${b}"} ${v.counts[i]}`));
        out.push(`${name}_bucket{${sep}le="+Inf"} ${v.count}`, `${name}_sum${k ? `{${k}}` : ''} ${v.sum}`, `${name}_count${k ? `{${k}}` : ''} ${v.count}`);
      }
    }
    return out.join('\n') + '\n';
  }
}
