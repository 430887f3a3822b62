// The live feed: `GET /api/v1/live`, read as a stream with the bearer key, scoped by the
// service to the key's organization. Messages carry ids and states only; pages use them
// as a signal to read the API again.
import { API_BASE } from './api.js';
import { createSseParser } from './sse.js';

const MAX_BACKOFF_MS = 30_000;

/**
 * Starts reading and reconnects (1 s doubling to 30 s) until `stop()`.
 * `onState('connecting' | 'live' | 'retrying' | 'off')`; `on401()` when the key is refused.
 */
export function startLive(key, { onState = () => {}, on401 = () => {} } = {}) {
  const listeners = new Set();
  const controller = new AbortController();
  let backoff = 1000;

  const deliver = ({ event, data }) => {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return;
    }
    if (!message || typeof message !== 'object') return;
    message.kind ??= event;
    for (const fn of listeners) {
      try {
        fn(message);
      } catch (err) {
        console.error('live listener failed', err);
      }
    }
  };

  const connect = async () => {
    onState('connecting');
    const res = await fetch(`${API_BASE}/live`, {
      headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' },
      signal: controller.signal,
      credentials: 'omit',
      cache: 'no-store',
    });
    if (res.status === 401) {
      on401();
      return 'stop';
    }
    if (!res.ok || !res.body) throw new Error(`live feed answered ${res.status}`);
    onState('live');
    backoff = 1000;
    const parser = createSseParser(deliver);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return 'ended';
      parser.push(value);
    }
  };

  (async () => {
    while (!controller.signal.aborted) {
      try {
        if ((await connect()) === 'stop') break;
      } catch (err) {
        if (controller.signal.aborted) break;
      }
      if (controller.signal.aborted) break;
      onState('retrying');
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
    onState('off');
  })();

  return {
    /** `fn(message)` for every message until the returned function is called. */
    subscribe(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    stop() {
      controller.abort();
      listeners.clear();
    },
  };
}
