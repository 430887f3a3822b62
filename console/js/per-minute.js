// Executions per minute by outcome, counted from the rows `GET /executions` lists.

export const OUTCOMES = ['success', 'failed', 'timeout', 'cancelled', 'in progress'];
const MINUTE_S = 60;

/** Rows (with `status`, `scheduled_for`) → uPlot's aligned data: minute starts, then one count array per outcome. */
export function perMinute(rows, fromMs, toMs) {
  const start = Math.floor(fromMs / 60_000) * MINUTE_S;
  const end = Math.floor(toMs / 60_000) * MINUTE_S;
  const xs = [];
  for (let t = start; t <= end; t += MINUTE_S) xs.push(t);
  const series = OUTCOMES.map(() => new Array(xs.length).fill(0));
  for (const row of rows) {
    const at = Date.parse(row.scheduled_for) / 1000;
    if (!(at >= start && at < end + MINUTE_S)) continue;
    const i = Math.floor((at - start) / MINUTE_S);
    const outcome = row.status === 'pending' || row.status === 'running' ? 'in progress' : row.status;
    const s = OUTCOMES.indexOf(outcome);
    if (s !== -1) series[s][i] += 1;
  }
  return [xs, ...series];
}

