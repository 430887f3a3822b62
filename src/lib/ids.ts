import { hash, randomBytes } from 'node:crypto';

// Crockford-ish base32 without ambiguous letters; ids sort roughly by creation
// time because the first 10 characters encode the millisecond clock.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** `n` in ALPHABET's base 32, at least `width` digits (zero-padded). */
function base32(n: number, width: number): string {
  let out = '';
  for (let rest = n; out.length < width || rest > 0; rest = Math.floor(rest / 32)) out = ALPHABET[rest % 32] + out;
  return out;
}

const encodeTime = (ms: number): string => base32(ms, 10);

// One system call per 4 KB of randomness instead of one per id.
const POOL_SIZE = 4096;
let pool = randomBytes(POOL_SIZE);
let offset = 0;

export function randomToken(length: number): string {
  if (offset + length > POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    offset = 0;
  }
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHABET[pool[offset + i]! % 32];
  offset += length;
  return out;
}

export type IdPrefix = 'org' | 'tsk' | 'sch' | 'mon' | 'ep' | 'exe' | 'evt' | 'png' | 'cmd' | 'ntf' | 'chn' | 'rjb';

export function newId(prefix: IdPrefix, nowMs = Date.now()): string {
  return `${prefix}_${encodeTime(nowMs)}${randomToken(12)}`;
}

/** ALPHABET's character codes, and the body of a derived id after its time, written in place (one string per id). */
const CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const derivedTail = Buffer.alloc(14);
/** The last time a derived id encoded: a bulk job derives thousands under one time. */
let lastTime = { ms: Number.NaN, text: '' };

/**
 * An id that the same inputs always give (a re-run after a crash must produce the
 * same ids), still sorting by time and then by `index`. A bulk job derives two per
 * position: the one-shot hash and the in-place body keep that to a digest and a string.
 */
export function derivedId(prefix: IdPrefix, nowMs: number, seed: string, index: number): string {
  return idOfDigest(prefix, nowMs, index, hash('sha256', `${seed}:${index}`, 'buffer'), 0);
}

/**
 * Two ids of the same inputs, as `derivedId` gives one, from one digest (its first and
 * second 12 bytes): a bulk job's position names its event and its execution so, at half
 * the hashing.
 */
export function derivedIdPair(prefixes: readonly [IdPrefix, IdPrefix], nowMs: number, seed: string, index: number): [string, string] {
  const digest = hash('sha256', `${seed}:${index}`, 'buffer');
  return [idOfDigest(prefixes[0], nowMs, index, digest, 0), idOfDigest(prefixes[1], nowMs, index, digest, 12)];
}

function idOfDigest(prefix: IdPrefix, nowMs: number, index: number, digest: Buffer, from: number): string {
  if (lastTime.ms !== nowMs) lastTime = { ms: nowMs, text: encodeTime(nowMs) };
  derivedTail[0] = CODES[Math.floor(index / 32) % 32]!;
  derivedTail[1] = CODES[index % 32]!;
  for (let i = 0; i < 12; i++) derivedTail[2 + i] = CODES[digest[from + i]! % 32]!;
  return `${prefix}_${lastTime.text}${derivedTail.toString('latin1', 0, 14)}`;
}

export const ID_PATTERN = /^[a-z]{2,3}_[0-9a-z]{10,40}$/;

/** Never in a generated id's body (not in ALPHABET): it marks where a commit id's sequence hint starts. */
const HINT_MARK = 'o';

/**
 * `id` with `seq` written after it (`<id>o<seq in base32>`): a stream sequence at or below
 * that of the message the id will name, so a reader finds that message on a subject many
 * messages share by reading on from there (`seqHintOf`).
 */
export function withSeqHint(id: string, seq: number): string {
  return `${id}${HINT_MARK}${base32(Math.max(0, Math.floor(seq)), 1)}`;
}

/** The sequence hint of an id made by `withSeqHint`, or null for an id without one. */
export function seqHintOf(id: string): number | null {
  const body = id.indexOf('_') + 1;
  const mark = id.indexOf(HINT_MARK, body);
  if (body === 0 || mark < 0) return null;
  let seq = 0;
  for (let i = mark + 1; i < id.length; i++) {
    const digit = ALPHABET.indexOf(id[i]!);
    if (digit < 0) return null;
    seq = seq * 32 + digit;
  }
  return mark + 1 < id.length && Number.isSafeInteger(seq) ? seq : null;
}

/** Never in a generated id's body (not in ALPHABET): it marks a member id. */
const MEMBER_MARK = 'u';

/**
 * The id of the `index`-th member of `parentId` (a task of a batch): `<prefix>_<parent's
 * body>u<index in base32>`. Whoever holds only the member's id can name its parent.
 */
export function memberId(prefix: IdPrefix, parentId: string, index: number): string {
  return `${prefix}_${parentId.slice(parentId.indexOf('_') + 1)}${MEMBER_MARK}${base32(index, 1)}`;
}

/** The parent a member id names (see `memberId`), or null for an id of its own. */
export function parentOf(id: string, parentPrefix: IdPrefix): string | null {
  const body = id.slice(id.indexOf('_') + 1);
  const mark = body.indexOf(MEMBER_MARK);
  return mark > 0 ? `${parentPrefix}_${body.slice(0, mark)}` : null;
}
