const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export const DURATION_PATTERN = '^[0-9]+(\\.[0-9]+)?[smhd]$';

/**
 * Ten years. A longer delay, debounce window or relative `since` is a mistake, and far
 * enough out (about 275,000 years) it is a date JavaScript cannot even represent.
 */
export const MAX_DURATION_MS = 3650 * 86_400_000;

function durationMs(text: string): number | undefined {
  const m = /^([0-9]+(?:\.[0-9]+)?)([smhd])$/.exec(text.trim());
  return m ? Math.round(Number(m[1]) * UNIT_MS[m[2]!]!) : undefined;
}

/** Parses the spec's duration format ("30s", "5m", "2h", "7d") into milliseconds; undefined when malformed or past {@link MAX_DURATION_MS}. */
export function parseDuration(text: string): number | undefined {
  const ms = durationMs(text);
  return ms !== undefined && ms <= MAX_DURATION_MS ? ms : undefined;
}

/** What is wrong with a duration text, as the end of a sentence naming the field; null when it is fine. */
export function durationProblem(text: string): string | null {
  const ms = durationMs(text);
  if (ms === undefined) return 'must be a number followed by s, m, h or d';
  if (ms > MAX_DURATION_MS) return `must be at most ${MAX_DURATION_MS / 86_400_000}d (10 years)`;
  return null;
}
