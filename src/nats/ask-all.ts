import { NoRespondersError, type RequestManyOptions } from '@nats-io/transport-node';
import { decodeJson } from '../lib/json.ts';
import type { Nats } from './connection.ts';

/**
 * A core request with many answers (every live process that serves `subject`): each
 * answer that decodes is handed to `take`, until it returns true or the strategy ends
 * the call. No process answering ("no responders") is no answer, not an error.
 */
export async function askAll<T>(nats: Nats, subject: string, payload: string, opts: Partial<RequestManyOptions>, take: (answer: T) => boolean | void): Promise<void> {
  try {
    const replies = await nats.nc.requestMany(subject, payload, opts);
    for await (const m of replies) {
      let answer: T;
      try {
        answer = decodeJson<T>(m.data);
      } catch {
        continue; // not an answer of ours
      }
      if (take(answer)) break;
    }
  } catch (err) {
    if (!(err instanceof NoRespondersError)) throw err;
  }
}
