import { STREAMS } from '../../streams/definitions.ts';
import { SUBJECTS } from '../../streams/subjects.ts';
import type { AttemptJob } from '../commands/execution/job.ts';
import { decodeJson, encodeJson } from '../lib/json.ts';
import type { Nats } from '../nats/connection.ts';
import { withTraceparent } from '../telemetry/tracing.ts';

/**
 * Deliveries of a paused endpoint wait in HELD, one subject per endpoint, in
 * arrival order. Resuming sends them to work in that order, then purges what was
 * sent; a crash half-way sends some again, which DISPATCH, LANES and the
 * dispatcher's check of the execution's log absorb.
 */
export function createHeld(nats: Nats) {
  const subjectOf = (job: AttemptJob) => SUBJECTS.held(job.org_id, job.source.id);
  return {
    async hold(job: AttemptJob): Promise<void> {
      await nats.publish(subjectOf(job), encodeJson(job), { msgId: `${job.execution_id}:held:${job.attempt}` });
    },
    /** Starts every held job of the endpoint, oldest first; returns how many. */
    async release(orgId: string, endpointId: string, start: (job: AttemptJob) => Promise<void>): Promise<number> {
      const subject = SUBJECTS.held(orgId, endpointId);
      let seq = 0;
      let n = 0;
      for (;;) {
        const msg = await nats.jsm.direct.getMessage(STREAMS.held.name, { next_by_subj: subject, seq: seq + 1 } as never);
        if (!msg) break;
        await withTraceparent(msg.header?.get('traceparent'), () => start(decodeJson<AttemptJob>(msg.data)));
        seq = msg.seq;
        n++;
      }
      if (n) await nats.jsm.streams.purge(STREAMS.held.name, { filter: subject, seq: seq + 1 });
      return n;
    },
    /** Whether any job of the endpoint is held. */
    async waiting(orgId: string, endpointId: string): Promise<boolean> {
      return (await nats.jsm.direct.getMessage(STREAMS.held.name, { last_by_subj: SUBJECTS.held(orgId, endpointId) })) !== null;
    },
    async purge(orgId: string, endpointId: string): Promise<void> {
      await nats.jsm.streams.purge(STREAMS.held.name, { filter: SUBJECTS.held(orgId, endpointId) });
    },
  };
}

export type Held = ReturnType<typeof createHeld>;
