/**
 * Every service profile of a benchmark, cut to the phase it marked (`phase.json` next to
 * the profiles: `{fromUs, toUs}` of the monotonic clock): where each process spent that
 * phase, not the whole run. `node bench/profile-phase.ts bench/results/profiles/monitors [top] [window]`:
 * `window` names another window file of that directory (`phase-job2.json`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { summarizeProfile, type PhaseWindow } from './profile.ts';
import { textTable } from './stats.ts';

const dir = process.argv[2] ?? 'bench/results/profiles/monitors';
const top = Number(process.argv[3] ?? 25);
const window = JSON.parse(readFileSync(path.join(dir, process.argv[4] ?? 'phase.json'), 'utf8')) as PhaseWindow;
for (const name of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort()) {
  const s = summarizeProfile(path.join(dir, name), top, window);
  if (s.busyMs < 50) continue;
  console.log(`\n== ${name}: ${s.busyMs.toFixed(0)} ms busy of ${s.totalMs.toFixed(0)} ms in the phase ==`);
  for (const t of [s.byWhere, s.byFunction, s.byCaller, s.byEntry]) console.log(`${textTable(t)}\n`);
}
