// Heartbeat runs from a monitor's pings: each end that closed a start (it has a
// `duration_ms`) is a run from `received_at − duration_ms` to `received_at`; a start
// that no listed end closed is a run still open (or one whose end was never sent).
// Pure functions: no DOM, checked in test/console-modules.unit.test.ts.

/** How an end ended: 'success', or why it was a failure. */
export function endOutcome(ping) {
  if (ping.kind === 'fail') return 'fail';
  if (ping.kind === 'exit' && ping.exit_status !== 0) return `exit ${ping.exit_status}`;
  return 'success';
}

/** A ping's kind as shown: `exit 3` for an exit status, else the kind. */
export const kindText = (ping) => (ping.kind === 'exit' ? `exit ${ping.exit_status}` : ping.kind);

/**
 * Runs, oldest first: `{ startMs, endMs (null while open), durationMs, rid, outcome,
 * lane }`; `lane` puts overlapping runs on separate rows (the first free one).
 */
export function runsOf(pings) {
  const oldestFirst = [...pings].sort((a, b) => Date.parse(a.received_at) - Date.parse(b.received_at));
  const runs = [];
  const closedStarts = new Set();
  const starts = oldestFirst.filter((p) => p.kind === 'start');
  for (const p of oldestFirst) {
    if (p.kind === 'start' || p.kind === 'log' || p.duration_ms == null) continue;
    const endMs = Date.parse(p.received_at);
    const startMs = endMs - p.duration_ms;
    // The start it closed: the same rid (or none) received at startMs.
    const start = starts.find((s) => !closedStarts.has(s) && (s.rid ?? null) === (p.rid ?? null) && Date.parse(s.received_at) === startMs)
      ?? starts.find((s) => !closedStarts.has(s) && Date.parse(s.received_at) === startMs);
    if (start) closedStarts.add(start);
    runs.push({ startMs, endMs, durationMs: p.duration_ms, rid: p.rid ?? null, outcome: endOutcome(p) });
  }
  for (const s of starts) {
    if (!closedStarts.has(s)) runs.push({ startMs: Date.parse(s.received_at), endMs: null, durationMs: null, rid: s.rid ?? null, outcome: 'running' });
  }
  runs.sort((a, b) => a.startMs - b.startMs);
  const laneEnds = [];
  for (const r of runs) {
    const end = r.endMs ?? Infinity;
    let lane = laneEnds.findIndex((e) => e <= r.startMs);
    if (lane < 0) lane = laneEnds.length;
    laneEnds[lane] = end;
    r.lane = lane;
  }
  return runs;
}

/** Why a monitor is down, in words. */
export function downReasonText(reason) {
  return {
    missed: 'no ping arrived in time',
    failed: 'the job reported a failure (/fail)',
    exit_status: 'the job exited with a non-zero status',
    too_long: 'a run did not end within its maximum duration',
    too_fast: 'a run ended faster than its minimum duration',
  }[reason] ?? reason ?? '';
}

/** The duration chart's data for uPlot: [end times (s), ascending; successful durations (s); failed durations (s)]. */
export function durationSeries(runs) {
  const done = runs.filter((r) => r.endMs !== null).sort((a, b) => a.endMs - b.endMs);
  return [
    done.map((r) => r.endMs / 1000),
    done.map((r) => (r.outcome === 'success' ? r.durationMs / 1000 : null)),
    done.map((r) => (r.outcome === 'success' ? null : r.durationMs / 1000)),
  ];
}
