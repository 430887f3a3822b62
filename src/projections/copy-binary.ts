import { storableText } from '../lib/input-checks.ts';
import { jsonText } from './bulk-write.ts';

/**
 * COPY's binary format: Postgres takes each value in its type's wire form, so it parses
 * no row text, no escapes and no timestamps (in a rebuild's profile COPY's text parsing
 * and the timestamps' were ~20% of Postgres's CPU). A value is written as the text
 * format would have Postgres read it; what this cannot say exactly (a timestamp in
 * another form, a number a column's type does not hold) makes `binaryRows` give up,
 * and those rows go as text, where Postgres judges them as before.
 */

/** The format's 11-byte signature, then the flags and the header extension's length (both 0). */
const HEADER = Buffer.from('PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0', 'latin1');
/** Microseconds from the Unix epoch to Postgres's, 2000-01-01. */
const PG_EPOCH_US = 946_684_800_000_000;
const TWO_32 = 4_294_967_296;
/** Past this, a string's bytes go through Buffer#write rather than a loop here. */
const SHORT = 48;
const NUL_OR_SURROGATE = /[\u0000\ud800-\udfff]/;

/** Thrown inside `binaryRows` when a value has no binary form here; never leaves it. */
class NotEncodable extends Error {}
const NOT_ENCODABLE = new NotEncodable();

/** A value's JSON text as COPY's text path writes it (before its escapes); null is NULL. */
export function jsonValue(value: unknown): string | null {
  // Most script logs: no call into JSON.stringify for them.
  if (Array.isArray(value) && value.length === 0) return '[]';
  const text = JSON.stringify(value);
  if (text === undefined || text === 'null') return null;
  return text.includes('\\') ? jsonText(value, text) : text;
}

const digit = (s: string, i: number) => {
  const c = s.charCodeAt(i) - 48;
  return c >= 0 && c <= 9 ? c : NaN;
};
const twoDigits = (s: string, i: number) => digit(s, i) * 10 + digit(s, i + 1);
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Postgres's too). */
function daysFromEpoch(y: number, m: number, d: number): number {
  const year = m <= 2 ? y - 1 : y;
  const era = Math.floor(year / 400);
  const yearOfEra = year - era * 400;
  const dayOfYear = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  return era * 146_097 + yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear - 719_468;
}

/**
 * Microseconds from 2000-01-01 UTC for a timestamp in `Date#toISOString`'s form or the
 * ISO 8601 forms like it (`YYYY-MM-DDTHH:MM:SS`, up to six decimals, `Z` or `±HH:MM`),
 * or undefined for any other form, a date that does not exist or one far from now
 * (Postgres then reads the text and judges). Read character by character: a rebuild
 * reads ~750,000 of them, and a regular expression's match and substrings for each
 * were most of the binary format's cost in the preparing thread.
 */
export function pgMicroseconds(s: string): number | undefined {
  const n = s.length;
  if (n < 20 || s[4] !== '-' || s[7] !== '-' || s[10] !== 'T' || s[13] !== ':' || s[16] !== ':') return undefined;
  const y = twoDigits(s, 0) * 100 + twoDigits(s, 2);
  const mo = twoDigits(s, 5);
  const d = twoDigits(s, 8);
  const h = twoDigits(s, 11);
  const mi = twoDigits(s, 14);
  const sec = twoDigits(s, 17);
  // NaN (a non-digit) fails every comparison.
  if (!(y >= 1000 && mo >= 1 && mo <= 12 && d >= 1 && h <= 23 && mi <= 59 && sec <= 59)) return undefined;
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  if (d > (mo === 2 && leap ? 29 : DAYS_IN_MONTH[mo - 1]!)) return undefined;
  let i = 19;
  let fraction = 0;
  if (s[i] === '.') {
    let scale = 100_000;
    for (i++; i < n && s[i] !== 'Z' && s[i] !== '+' && s[i] !== '-'; i++, scale /= 10) fraction += digit(s, i) * scale;
    if (i === 20 || i > 26 || !(fraction >= 0)) return undefined;
  }
  let offset = 0;
  if (s[i] === 'Z') {
    if (i + 1 !== n) return undefined;
  } else {
    if (i + 6 !== n || s[i + 3] !== ':' || (s[i] !== '+' && s[i] !== '-')) return undefined;
    const zh = twoDigits(s, i + 1);
    const zm = twoDigits(s, i + 4);
    if (!(zh <= 15 && zm <= 59)) return undefined;
    offset = (s[i] === '-' ? -1 : 1) * (zh * 60 + zm) * 60;
  }
  const seconds = daysFromEpoch(y, mo, d) * 86_400 + (h * 60 + mi) * 60 + sec - offset;
  const us = seconds * 1_000_000 + fraction - PG_EPOCH_US;
  return Number.isSafeInteger(us) ? us : undefined;
}

/**
 * One buffer the rows are written into, grown as needed and kept: each COPY's rows
 * are then copied out once, at their size. A buffer grown by doubling for each COPY
 * allocated ~3 times the rows' bytes, and V8 answers that much external memory with
 * full collections (measured: the preparing thread's process CPU for the statements
 * 2.3 → 5.7 s). It holds the largest COPY's rows so far: a rebuild's ~40 MB, the live
 * projector's far less.
 */
let scratch = Buffer.allocUnsafeSlow(1 << 16);

/** A COPY's binary rows, written into `scratch`. */
class BinaryRows {
  private buf = scratch;
  private at = 0;

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const bigger = Buffer.allocUnsafeSlow(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(bigger, 0, 0, this.at);
    this.buf = scratch = bigger;
  }

  bytes(data: Buffer): void {
    this.room(data.length);
    data.copy(this.buf, this.at);
    this.at += data.length;
  }

  int16(n: number): void {
    this.room(2);
    this.buf.writeInt16BE(n, this.at);
    this.at += 2;
  }

  null(): void {
    this.room(4);
    this.buf.writeInt32BE(-1, this.at);
    this.at += 4;
  }

  int32(n: number): void {
    this.room(8);
    this.buf.writeInt32BE(4, this.at);
    this.buf.writeInt32BE(n, this.at + 4);
    this.at += 8;
  }

  /** A safe integer as int8 (timestamps are one too). */
  int64(n: number): void {
    this.room(12);
    const high = Math.floor(n / TWO_32);
    this.buf.writeInt32BE(8, this.at);
    this.buf.writeInt32BE(high, this.at + 4);
    this.buf.writeUInt32BE(n - high * TWO_32, this.at + 8);
    this.at += 12;
  }

  bool(b: boolean): void {
    this.room(5);
    this.buf.writeInt32BE(1, this.at);
    this.buf[this.at + 4] = b ? 1 : 0;
    this.at += 5;
  }

  /**
   * A string's UTF-8 with its length, after `prefix` (jsonb's version byte). Short ASCII
   * strings (most keys and names) are copied byte by byte here: a call into Buffer#write
   * for each costs more than the loop. `json`: JSON.stringify's text, which writes NUL
   * and lone surrogates as escapes, so it is not searched for them.
   */
  text(s: string, prefix = -1, json = false): void {
    const n = s.length;
    const extra = prefix < 0 ? 0 : 1;
    this.room(4 + extra + n * 3);
    const buf = this.buf;
    const start = this.at + 4 + extra;
    if (extra) buf[start - 1] = prefix;
    let length = -1;
    if (n <= SHORT) {
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c === 0 || c > 0x7f) break;
        buf[start + i] = c;
      }
      if (i === n) length = n;
    }
    if (length < 0) length = buf.write(json || !NUL_OR_SURROGATE.test(s) ? s : storableText(s), start);
    buf.writeInt32BE(length + extra, this.at);
    this.at = start + length;
  }

  /** The rows so far in a buffer of their own: the preparing thread moves it to the writing one. */
  take(): Buffer {
    const out = Buffer.allocUnsafeSlow(this.at);
    this.buf.copy(out, 0, 0, this.at);
    return out;
  }
}

/** Column types this module writes; a column of another type keeps its rows in the text format. */
const BINARY_TYPES = new Set(['text', 'json', 'jsonb', 'timestamptz', 'integer', 'bigint', 'boolean']);

const INT32_MIN = -2_147_483_648;
const INT32_MAX = 2_147_483_647;

function writeValue(out: BinaryRows, value: unknown, type: string): void {
  if (value === null || value === undefined) return out.null();
  switch (type) {
    case 'text': {
      if (typeof value === 'string') return out.text(value);
      if (value instanceof Date) return out.text(value.toISOString());
      const json = jsonValue(value);
      return json === null ? out.null() : out.text(json, -1, true);
    }
    case 'json':
    case 'jsonb': {
      const json = jsonValue(value);
      if (json === null) return out.null();
      return out.text(json, type === 'jsonb' ? 1 : -1, true);
    }
    case 'timestamptz': {
      const us = value instanceof Date ? value.getTime() * 1000 - PG_EPOCH_US : typeof value === 'string' ? pgMicroseconds(value) : undefined;
      if (us === undefined || !Number.isSafeInteger(us)) throw NOT_ENCODABLE;
      return out.int64(us);
    }
    case 'integer':
      if (!Number.isInteger(value) || (value as number) < INT32_MIN || (value as number) > INT32_MAX) throw NOT_ENCODABLE;
      return out.int32(value as number);
    case 'bigint':
      if (!Number.isSafeInteger(value)) throw NOT_ENCODABLE;
      return out.int64(value as number);
    case 'boolean':
      if (typeof value !== 'boolean') throw NOT_ENCODABLE;
      return out.bool(value);
  }
  throw NOT_ENCODABLE;
}

/**
 * Rows that share `columns` (of these Postgres types) in COPY's binary format, or null
 * when a column's type or a value has no binary form here (the caller writes text).
 */
export function binaryRows(rows: Record<string, unknown>[], columns: string[], types: string[]): Buffer | null {
  if (!types.every((t) => BINARY_TYPES.has(t))) return null;
  const out = new BinaryRows();
  out.bytes(HEADER);
  try {
    for (const row of rows) {
      out.int16(columns.length);
      for (let i = 0; i < columns.length; i++) writeValue(out, row[columns[i]!], types[i]!);
    }
  } catch (err) {
    if (err === NOT_ENCODABLE) return null;
    throw err;
  }
  out.int16(-1);
  return out.take();
}
