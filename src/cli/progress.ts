/** Where progress goes: `process.stderr`, or anything shaped like it (tests pass a fake). */
export interface ProgressOut {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface ProgressOptions {
  /** Starts every line: `rebuild`, `replay daily_outcomes_v1`. */
  label: string;
  total: number;
  out: ProgressOut;
  /** Milliseconds; injected so tests drive the clock. */
  now?: () => number;
}

/** A terminal redraws in place up to 10 times a second; a log file gets one line per 5 s. */
const TTY_EVERY_MS = 100;
const PLAIN_EVERY_MS = 5_000;
const BAR_WIDTH = 24;
const CLEAR_LINE = '\r\x1b[K';

const perSecond = (n: number, ms: number) => (ms > 0 ? (n * 1000) / ms : 0);
const grouped = (n: number) => Math.round(n).toLocaleString('en-US');

export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** The line a finished run ends with: `rebuild: 450,000 events in 21.4 s (21,034/s)`. */
export function summaryLine(label: string, events: number, ms: number): string {
  return `${label}: ${grouped(events)} events in ${(ms / 1000).toFixed(1)} s (${grouped(perSecond(events, ms))}/s)`;
}

/**
 * Progress of a long run over a known number of events. Nothing runs on a timer:
 * each `update` decides whether it is time to draw, so a stalled run prints nothing
 * new and a test controls every line through `now`.
 */
export function startProgress(opts: ProgressOptions) {
  const now = opts.now ?? Date.now;
  const tty = opts.out.isTTY === true;
  const t0 = now();
  let total = opts.total;
  let done = 0;
  let drawnAt = t0;
  let barShown = false;
  let ended = false;

  const status = () => {
    const ms = now() - t0;
    const rate = perSecond(done, ms);
    const pct = total > 0 ? Math.min(100, (done / total) * 100) : 100;
    const eta = rate > 0 ? duration((total - done) / rate) : '?';
    return { pct, text: `${done}/${total} events (${pct.toFixed(1)}%), ${grouped(rate)}/s, ETA ${eta}` };
  };

  const drawBar = () => {
    const { pct, text } = status();
    const filled = Math.round((pct / 100) * BAR_WIDTH);
    const line = `${opts.label} [${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${text}`;
    // A line longer than the terminal wraps, and \r then redraws only its last row.
    opts.out.write(`${CLEAR_LINE}${opts.out.columns ? line.slice(0, opts.out.columns - 1) : line}`);
    barShown = true;
  };

  return {
    /** `events` done so far (and the total, should it grow). */
    update(events: number, newTotal = total): void {
      if (ended) return;
      done = events;
      total = newTotal;
      const t = now();
      if (t - drawnAt < (tty ? TTY_EVERY_MS : PLAIN_EVERY_MS)) return;
      drawnAt = t;
      if (tty) drawBar();
      else opts.out.write(`${opts.label}: ${status().text}\n`);
    },
    /** Writes other output (a log line) without tearing the bar: it is cleared, then drawn again below. */
    aside(write: () => void): void {
      if (!barShown || ended) return write();
      opts.out.write(CLEAR_LINE);
      write();
      drawBar();
    },
    /** Ends the bar with the summary line (`note` appended); returns the seconds taken. */
    finish(events = done, note?: string): number {
      const ms = now() - t0;
      if (!ended) opts.out.write(`${barShown ? CLEAR_LINE : ''}${summaryLine(opts.label, events, ms)}${note ? `; ${note}` : ''}\n`);
      ended = true;
      return ms / 1000;
    },
  };
}

export type Progress = ReturnType<typeof startProgress>;
