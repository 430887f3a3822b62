const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export const DURATION_PATTERN = '^[0-9]+(\\.[0-9]+)?[smhd]$';

/** Parses the spec's duration format ("30s", "5m", "2h", "7d") into milliseconds. */
export function parseDuration(text: string): number | undefined {
  const m = /^([0-9]+(?:\.[0-9]+)?)([smhd])$/.exec(text.trim());
  if (!m) return undefined;
  return Math.round(Number(m[1]) * UNIT_MS[m[2]!]!);
}
