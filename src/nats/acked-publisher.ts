import { createInbox, headers, type Subscription } from '@nats-io/transport-node';
import type { Nats } from './connection.ts';

interface Waiting {
  resolve: (seq: number) => void;
  reject: (err: Error) => void;
  at: number;
}

const decoder = new TextDecoder();

/**
 * JetStream publishes that wait for their ack, for the inbound hot path. nats.js's
 * `js.publish` is a request: a fresh reply subject, a timer and an Error object per
 * call, which showed as a tenth of the receiver's CPU. Here one wildcard
 * subscription takes every ack, matched by a counter in the reply subject, and one
 * sweep per second times out the late ones. Semantics are `js.publish`'s with a
 * `Nats-Msg-Id`: resolves with the stream sequence once the message is stored.
 */
export function createAckedPublisher(nats: Nats, timeoutMs = 10_000) {
  const prefix = createInbox();
  const waiting = new Map<string, Waiting>();
  let counter = 0;
  const settle = (token: string, fn: (w: Waiting) => void) => {
    const w = waiting.get(token);
    if (!w) return;
    waiting.delete(token);
    fn(w);
  };
  const sub: Subscription = nats.nc.subscribe(`${prefix}.*`, {
    callback: (_err, msg) => {
      const token = msg.subject.slice(prefix.length + 1);
      // An empty answer with a status header: no stream took the subject (503) or another error.
      if (!msg.data.length) {
        const code = msg.headers?.code ?? 0;
        return settle(token, (w) => w.reject(new Error(`no JetStream stream stored the message (status ${code})`)));
      }
      let ack: { seq?: number; error?: { description?: string } };
      try {
        ack = JSON.parse(decoder.decode(msg.data));
      } catch {
        return settle(token, (w) => w.reject(new Error('unreadable JetStream ack')));
      }
      if (ack.error || typeof ack.seq !== 'number') {
        return settle(token, (w) => w.reject(new Error(`JetStream refused the message: ${ack.error?.description ?? 'no sequence'}`)));
      }
      settle(token, (w) => w.resolve(ack.seq!));
    },
  });
  const sweep = setInterval(() => {
    const late = Date.now() - timeoutMs;
    for (const [token, w] of waiting) {
      if (w.at > late) break; // insertion order = age order
      waiting.delete(token);
      w.reject(new Error(`no JetStream ack within ${timeoutMs} ms`));
    }
  }, 1000);
  sweep.unref();

  return {
    publish(subject: string, data: Uint8Array, msgId: string): Promise<number> {
      const token = (counter++).toString(36);
      const h = headers();
      h.set('Nats-Msg-Id', msgId);
      return new Promise<number>((resolve, reject) => {
        waiting.set(token, { resolve, reject, at: Date.now() });
        try {
          nats.nc.publish(subject, data, { reply: `${prefix}.${token}`, headers: h });
        } catch (err) {
          waiting.delete(token);
          reject(err as Error);
        }
      });
    },
    close(): void {
      clearInterval(sweep);
      sub.unsubscribe();
      for (const w of waiting.values()) w.reject(new Error('publisher closed'));
      waiting.clear();
    },
  };
}

export type AckedPublisher = ReturnType<typeof createAckedPublisher>;
