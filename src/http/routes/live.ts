import express from 'express';
import { handler, type ApiDeps } from '../context.ts';

/** A client that stops reading: past this much text not yet sent, its feed is ended (it may reconnect). */
const MAX_UNSENT_BYTES = 1 << 20;

const STREAM_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-store',
  // A proxy such as nginx would otherwise hold the messages back in its buffer.
  'X-Accel-Buffering': 'no',
};

/**
 * `GET /live`: the organization's events as server-sent events (src/live/). The
 * answer begins only once the feed reads the log, so whatever the client does after
 * it sees the answer's headers is on the feed.
 */
export function liveRoutes(deps: Pick<ApiDeps, 'live'>) {
  const router = express.Router();
  router.get('/live', handler(async (req, res) => {
    // HEAD has no body to stream: the headers alone, and no feed held open.
    if (req.method === 'HEAD') return void res.writeHead(200, STREAM_HEADERS).end();
    let started = false;
    // Messages that arrive while the answer has not begun go out right behind its headers.
    let early = '';
    const feed = deps.live.open(req.orgId, req.keyId, {
      write(chunk) {
        if (!started) {
          early += chunk;
          return;
        }
        res.write(chunk);
        if (res.writableLength > MAX_UNSENT_BYTES) res.destroy();
      },
      end() {
        if (!started) return void res.destroy();
        // The service stops, or the key was revoked: the connection goes too (a stop would wait for it to go idle).
        const socket = res.socket;
        res.end(() => socket?.end());
      },
    });
    res.once('close', feed.close);
    try {
      await feed.ready;
    } catch (err) {
      feed.close();
      throw err;
    }
    if (res.destroyed || res.writableEnded) return;
    res.writeHead(200, STREAM_HEADERS);
    started = true;
    res.write(`: connected\n\n${early}`);
  }));
  return router;
}
