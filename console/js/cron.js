// A schedule's next runs, worked out in the browser: the API gives `next_run_at` only.
// The dialect is the contract's (5 fields or 6 with seconds first; names, lists, ranges,
// steps, the @ aliases), evaluated in the schedule's time zone by stepping through real
// instants, so DST moves the runs as wall clocks move. Anything it does not know
// gives null, and the page shows the API's next run alone.

const ALIASES = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

function valueOf(text, names, offset) {
  if (/^\d+$/.test(text)) return Number(text);
  const i = names ? names.indexOf(text.toLowerCase()) : -1;
  return i === -1 ? NaN : i + offset;
}

/** One field → the set of values it allows, or null when it is not understood. */
function parseField(text, min, max, names = null, offset = 0) {
  const values = new Set();
  for (const part of text.split(',')) {
    const m = /^(\*|\?|[a-z0-9]+)(?:-([a-z0-9]+))?(?:\/(\d+))?$/i.exec(part);
    if (!m) return null;
    const [, first, rangeEnd, stepText] = m;
    const step = stepText === undefined ? 1 : Number(stepText);
    let lo;
    let hi;
    if (first === '*' || first === '?') {
      if (rangeEnd !== undefined) return null;
      [lo, hi] = [min, max];
    } else {
      lo = valueOf(first, names, offset);
      hi = rangeEnd !== undefined ? valueOf(rangeEnd, names, offset) : stepText !== undefined ? max : lo;
    }
    if (!Number.isInteger(lo) || !Number.isInteger(hi) || step < 1 || lo < min || hi > max || lo > hi) return null;
    for (let v = lo; v <= hi; v += step) values.add(v);
  }
  return values;
}

/** The expression as sets per field, or null. */
export function parseCron(expr) {
  const trimmed = String(expr ?? '').trim();
  const expanded = trimmed.startsWith('@') ? ALIASES[trimmed.toLowerCase()] : trimmed;
  if (!expanded) return null;
  const fields = expanded.split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) return null;
  const [sec, min, hour, dom, month, dow] = fields.length === 6 ? fields : ['0', ...fields];
  const spec = {
    seconds: parseField(sec, 0, 59),
    minutes: parseField(min, 0, 59),
    hours: parseField(hour, 0, 23),
    days: parseField(dom, 1, 31),
    months: parseField(month, 1, 12, MONTHS, 1),
    weekdays: parseField(dow, 0, 7, DAYS, 0),
    anyDay: dom === '*' || dom === '?',
    anyWeekday: dow === '*' || dow === '?',
  };
  if (Object.values(spec).some((v) => v === null)) return null;
  if (spec.weekdays.has(7)) spec.weekdays.add(0);
  spec.secondList = [...spec.seconds].sort((a, b) => a - b);
  return spec;
}

/** Wall-clock parts of an instant in `tz`. */
function wallClock(tz) {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone: tz, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', weekday: 'short',
  });
  return (ms) => {
    const p = {};
    for (const { type, value } of format.formatToParts(ms)) p[type] = value;
    return { month: Number(p.month), day: Number(p.day), hour: Number(p.hour), minute: Number(p.minute), weekday: DAYS.indexOf(p.weekday.toLowerCase()) };
  };
}

// Both day fields restricted: either may match (Vixie cron's rule, and cron-parser's).
function dayMatches(spec, p) {
  const dom = spec.days.has(p.day);
  const dow = spec.weekdays.has(p.weekday);
  if (spec.anyDay && spec.anyWeekday) return true;
  if (spec.anyDay) return dow;
  if (spec.anyWeekday) return dom;
  return dom || dow;
}

const MINUTE = 60_000;
const HORIZON_MS = 5 * 366 * 86_400_000;

/**
 * The next `count` run times (Date) strictly after `afterMs`, or null for an expression
 * or time zone this module does not understand.
 */
export function nextRuns(expr, tz, afterMs, count = 5) {
  const spec = parseCron(expr);
  if (!spec) return null;
  let clock;
  try {
    clock = wallClock(tz || 'UTC');
  } catch {
    return null;
  }
  const runs = [];
  const end = afterMs + HORIZON_MS;
  // Zone offsets are whole minutes, so UTC minute starts are local minute starts.
  let t = Math.floor(afterMs / MINUTE) * MINUTE;
  while (runs.length < count && t < end) {
    const p = clock(t);
    if (!spec.months.has(p.month) || !dayMatches(spec, p) || !spec.hours.has(p.hour)) {
      t += (60 - p.minute) * MINUTE;
      continue;
    }
    if (spec.minutes.has(p.minute)) {
      for (const s of spec.secondList) {
        const at = t + s * 1000;
        if (at > afterMs && runs.length < count) runs.push(new Date(at));
      }
    }
    t += MINUTE;
  }
  return runs;
}
