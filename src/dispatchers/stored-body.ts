import { isUtf8 } from 'node:buffer';

/**
 * How a target's response body is kept: as text when it is UTF-8 that Postgres text
 * and jsonb can hold (no NUL), else as base64 of the exact bytes, so any answer
 * round-trips byte for byte and none can stop the projector.
 */
export interface StoredBody {
  response_body: string;
  /** Absent = `utf8`. */
  response_body_encoding?: 'base64';
}

/** NUL is valid UTF-8, but no Postgres text or jsonb can hold it: such bytes are not storable text. */
export const storableAsText = (bytes: Buffer): boolean => isUtf8(bytes) && !bytes.includes(0);

export function storedBody(bytes: Buffer, truncated: boolean): StoredBody {
  let text = bytes;
  // A body cut at the size cap may end inside a character: drop that partial character.
  if (truncated && !isUtf8(text)) {
    for (let cut = 1; cut <= 3 && cut <= bytes.length; cut++) {
      if (isUtf8(bytes.subarray(0, bytes.length - cut))) {
        text = bytes.subarray(0, bytes.length - cut);
        break;
      }
    }
  }
  if (storableAsText(text)) return { response_body: text.toString('utf8') };
  return { response_body: bytes.toString('base64'), response_body_encoding: 'base64' };
}
