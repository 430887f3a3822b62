/**
 * Pings with monitor partition owners off and on (JETCRON_MONITOR_OWNERS), alternating
 * in one run, for a comparison that a shared machine's drift between two `npm run bench
 * -- monitors` runs cannot give: each round starts a fresh in-process service (every role
 * in this process, as the tests do: its CPU is this process's), creates 2,000 interval
 * monitors (1 h, so none goes down during the phase), sends 2,000 warm-up pings, then
 * 8,000 `GET /ping/<token>` at concurrency 64 from a forked load process, and counts this
 * process's CPU over the phase and the 3 s after it (the projector finishing).
 *
 *   node bench/monitors-inprocess-ab.ts [rounds]
 */
import { fork } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestService } from '../test/support/service.ts';

const PINGS = 8_000;
const MONITORS = 2_000;
const rounds = Number(process.argv[2] ?? 3);

const loader = path.join(mkdtempSync(path.join(os.tmpdir(), 'jetcron-ab-')), 'loader.mjs');
writeFileSync(loader, `
const [url, tokensJson, n, c] = process.argv.slice(2);
const tokens = JSON.parse(tokensJson);
let i = 0; let ok = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: Number(c) }, async () => {
  while (i < Number(n)) { const k = i++; const r = await fetch(url + '/ping/' + tokens[k % tokens.length]); if (r.status === 200) ok++; await r.arrayBuffer(); }
}));
process.send({ ok, ms: performance.now() - t0 });
`);
const load = (url: string, tokens: string[], n: number) => new Promise<{ ok: number; ms: number }>((resolve) => {
  const p = fork(loader, [url, JSON.stringify(tokens), String(n), '64']);
  p.once('message', (m) => {
    resolve(m as { ok: number; ms: number });
    p.kill();
  });
});

for (let round = 1; round <= rounds; round++) {
  for (const owners of ['0', '1']) {
    const svc = await startTestService({ JETCRON_MONITOR_OWNERS: owners, JETCRON_TIME_SCALE: '1' });
    const { api } = await svc.createOrg('pro');
    const tokens: string[] = [];
    for (let i = 0; i < MONITORS; i++) {
      const made = await api('POST', '/monitors', { name: `m${i}`, schedule_type: 'interval', interval_seconds: 3600, grace_period_seconds: 60 });
      tokens.push(String(made.body.data.ping_url).split('/ping/')[1]!);
    }
    await load(svc.url, tokens, MONITORS);
    await new Promise((r) => setTimeout(r, 2_000));
    const before = process.cpuUsage();
    const r = await load(svc.url, tokens, PINGS);
    await new Promise((res) => setTimeout(res, 3_000));
    const cpu = process.cpuUsage(before);
    const perPing = (cpu.user + cpu.system) / 1000 / PINGS;
    console.log(`round ${round} owners=${owners}: ${r.ok}/${PINGS} answered 200, ${Math.round(PINGS / (r.ms / 1000))} pings/s, jetcron CPU ${perPing.toFixed(3)} ms per ping`);
    await svc.stop();
  }
}
process.exit(0);
