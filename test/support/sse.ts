/** One server-sent event as a client sees it. */
export interface SseEvent {
  event: string;
  data: string;
}

/**
 * Parses the text of an event stream as the HTML standard says: lines end in LF,
 * CR LF or CR; a blank line dispatches; `:` starts a comment; one space after the
 * field's colon is dropped. Returns what is complete (blocks a blank line closed) and the rest.
 */
export function parseSse(text: string): { events: SseEvent[]; comments: string[]; rest: string } {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const lines = text.split(/\r\n|\r|\n/);
  // The last piece has no line end yet; nor has a block that no blank line closed.
  let blockStart = 0;
  let event = '';
  let data: string[] = [];
  let blockComments: string[] = [];
  for (let i = 0; i < lines.length - 1; i++) {
    const line = lines[i]!;
    if (line === '') {
      if (data.length) events.push({ event: event || 'message', data: data.join('\n') });
      comments.push(...blockComments);
      event = '';
      data = [];
      blockComments = [];
      blockStart = i + 1;
      continue;
    }
    if (line.startsWith(':')) {
      blockComments.push(line.slice(1).replace(/^ /, ''));
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  return { events, comments, rest: lines.slice(blockStart).join('\n') };
}

export interface LiveFeedClient {
  status: number;
  headers: Headers;
  /** The JSON body of an answer that is not a stream (an error). */
  body: any;
  /** The `data` of every message so far, parsed, with its `event:` name. */
  messages: Array<{ event: string; data: any }>;
  comments: string[];
  /** Everything the stream carried so far, as text. */
  text(): string;
  /** The first message (already here or still to come) that `match` accepts. */
  waitFor(match: (m: any) => boolean, timeoutMs?: number, what?: string): Promise<any>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  /** Drops the connection, as a closed browser tab does. */
  close(): void;
}

/** `GET /api/v1/live` read with fetch, as the console reads it (EventSource cannot send the key). */
export async function openLiveFeed(baseUrl: string, apiKey: string | null, headers: Record<string, string> = {}): Promise<LiveFeedClient> {
  const abort = new AbortController();
  const res = await fetch(`${baseUrl}/api/v1/live`, {
    headers: { ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}), ...headers },
    signal: AbortSignal.any([abort.signal, AbortSignal.timeout(120_000)]),
  });
  let raw = '';
  const messages: Array<{ event: string; data: any }> = [];
  const comments: string[] = [];
  const listeners = new Set<() => void>();
  const isStream = res.ok && (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
  const body = isStream ? undefined : await res.json().catch(() => undefined);
  let rest = '';
  const ended = (async () => {
    if (!isStream || !res.body) return;
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        const text = decoder.decode(chunk, { stream: true });
        raw += text;
        const parsed = parseSse(rest + text);
        rest = parsed.rest;
        comments.push(...parsed.comments);
        for (const e of parsed.events) messages.push({ event: e.event, data: JSON.parse(e.data) });
        for (const l of listeners) l();
      }
    } catch {
      /* dropped by close(), or by the server */
    }
    for (const l of listeners) l();
  })();
  return {
    status: res.status,
    headers: res.headers,
    body,
    messages,
    comments,
    text: () => raw,
    ended,
    close: () => abort.abort(),
    waitFor(match, timeoutMs = 20_000, what = 'a matching message') {
      return new Promise((resolve, reject) => {
        let done = false;
        const check = () => {
          if (done) return;
          const found = messages.find((m) => match(m.data));
          if (found) {
            done = true;
            listeners.delete(check);
            clearTimeout(timer);
            resolve(found.data);
          }
        };
        const timer = setTimeout(() => {
          done = true;
          listeners.delete(check);
          reject(new Error(`${what}: not on the feed within ${timeoutMs} ms; it carried ${JSON.stringify(messages.map((m) => m.data))}`));
        }, timeoutMs);
        listeners.add(check);
        check();
      });
    },
  };
}
