import { once } from 'node:events';
import type pg from 'pg';
import { from as copyFromStdin } from 'pg-copy-streams';

/**
 * The rows of a `COPY … FROM STDIN` statement, passed as its one parameter: a client of
 * `connectDb`'s kysely sends them by COPY (`sendCopy`) instead of binding a parameter.
 */
export class CopyData {
  readonly bytes: Buffer;

  constructor(bytes: Buffer) {
    this.bytes = bytes;
  }
}

/** Rows sent in writes of at most this many bytes, each one CopyData message (Postgres reads each whole into its memory). */
const CHUNK = 1 << 20;

/**
 * `text` (a `COPY … FROM STDIN`) with `data` as its rows, on `client`, through
 * pg-copy-streams. Each chunk waits for the one before it to leave (the stream's
 * backpressure), and none is written once Postgres has refused the COPY: the stream
 * writes what it holds to the socket on every drain, also after the refusal has taken
 * its connection away, which throws where nothing can catch it (`test/copy-binary.int.test.ts`).
 */
export async function sendCopy(client: pg.ClientBase, text: string, data: Buffer): Promise<{ command: 'COPY'; rowCount: number; rows: [] }> {
  const copy = client.query(copyFromStdin(text));
  const state: { refused?: { err: unknown } } = {};
  // Stays for the stream's life: an error after the last wait must not go unheard.
  copy.on('error', (err: unknown) => {
    state.refused ??= { err };
  });
  const settled = async (event: string) => {
    try {
      await once(copy, event);
    } catch {
      // `once` rejects with the error the listener above keeps.
    }
    if (state.refused) throw state.refused.err;
  };
  for (let at = 0; at < data.length; at += CHUNK) {
    if (!copy.write(data.subarray(at, at + CHUNK))) await settled('drain');
  }
  copy.end();
  // 'finish' comes after Postgres's ReadyForQuery: the client is free for the next query.
  await settled('finish');
  return { command: 'COPY', rowCount: copy.rowCount, rows: [] };
}
