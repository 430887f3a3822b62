import http from 'node:http';
import net from 'node:net';

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The parsed JSON body, or undefined when it is not JSON. */
  body: any;
}

const parse = (text: string): unknown => {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
};

/**
 * One request with the path sent exactly as given (fetch would normalize it) and any
 * header or body bytes (`chunked`: without a Content-Length). Node still refuses control characters in the path and header
 * values; {@link rawExchange} sends those.
 */
export function rawRequest(base: string, opts: { method?: string; path: string; headers?: Record<string, string>; body?: Buffer | string; chunked?: boolean; timeoutMs?: number }): Promise<RawResponse> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname,
      port: url.port,
      method: opts.method ?? 'GET',
      path: opts.path,
      headers: opts.headers,
      agent: false,
      timeout: opts.timeoutMs ?? 20_000,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode!, headers: res.headers, text, body: parse(text) });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${opts.timeoutMs ?? 20_000} ms: ${opts.method ?? 'GET'} ${opts.path}`)));
    req.on('error', reject);
    // chunked: the body goes out without a Content-Length.
    if (opts.chunked && opts.body !== undefined && opts.body.length > 0) {
      req.write(opts.body);
      req.end();
    } else req.end(opts.body);
  });
}

/**
 * Writes `bytes` to a fresh connection and reads until the server closes it or
 * `timeoutMs` passes; returns the first response's status (0 when none came).
 */
export function rawExchange(base: string, bytes: Buffer | string, timeoutMs = 5000): Promise<{ status: number; text: string }> {
  const url = new URL(base);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(Number(url.port), url.hostname);
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : 0, text });
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('connect', () => socket.write(bytes));
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      // One response is all we want; keep-alive would otherwise hold the socket open.
      const text = Buffer.concat(chunks).toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      if (head < 0) return;
      const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, head));
      if (length && text.length - head - 4 >= Number(length[1])) finish();
    });
    socket.on('error', finish);
    socket.on('close', finish);
  });
}
