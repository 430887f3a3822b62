import type { NextFunction, Request, Response } from 'express';
import { SUBJECTS } from '../../streams/subjects.ts';
import { createBarrier } from '../nats/barrier.ts';
import type { Nats } from '../nats/connection.ts';
import { parsePosition, positionText } from '../nats/written-positions.ts';
import { createPositionWaiter } from '../lib/position-waiter.ts';
import type { Watermark } from '../projections/watermark.ts';
import type { AuthedRequest } from './context.ts';

/** How long a read waits for the projector before it answers with what Postgres has. */
const READ_WAIT_MS = 5_000;
const SWEEP_EVERY_MS = 10_000;

/**
 * Read-your-writes on the read side. A write answers as soon as the log stored it
 * (from the decided state) and records the organization's position here; a later
 * read of that organization waits until the projector has committed it. Positions
 * are shared with every API process over a core subject. A write answers only once
 * the server has routed its position (a round trip after the publish), and a read
 * first makes a round trip of its own, which the server answers after every message
 * it queued for this process before: so a read that lands on another API process
 * connected to the same server knows of the write. (Connected to another server of a
 * cluster, the position crosses a route, and a read may come in a little before it.)
 */
export function createReadYourWrites(nats: Nats, watermark: Watermark) {
  const written = new Map<string, number>();
  /** Organizations with inbound requests stored in INBOUND that the router has yet to record: the highest such sequence. */
  const unrouted = new Map<string, number>();
  /** How far the inbound router has recorded INBOUND, as it announces it. */
  const router = createPositionWaiter();
  const barrier = createBarrier(nats.nc);
  const raise = (orgId: string, seq: number) => {
    if (seq > (written.get(orgId) ?? 0)) written.set(orgId, seq);
  };
  const raiseUnrouted = (orgId: string, seq: number) => {
    if (seq > router.at && seq > (unrouted.get(orgId) ?? 0)) unrouted.set(orgId, seq);
  };
  const sub = nats.nc.subscribe(SUBJECTS.written, {
    callback: (_err, m) => {
      const position = parsePosition(m.string());
      if (position?.kind === 'events') raise(position.orgId, position.seq);
      else if (position?.kind === 'inbound') raiseUnrouted(position.orgId, position.seq);
      else if (position?.kind === 'routed') router.advance(position.seq);
    },
  });
  // Positions the read models have passed are forgotten, so the map holds only organizations with writes in flight.
  const sweep = setInterval(() => {
    for (const [orgId, seq] of written) if (seq <= watermark.seq) written.delete(orgId);
    for (const [orgId, seq] of unrouted) if (seq <= router.at) unrouted.delete(orgId);
  }, SWEEP_EVERY_MS);
  sweep.unref();

  /**
   * The positions written in one turn of the event loop go out together at its end:
   * one message per organization (its highest) and one PING behind them all, whose
   * PONG tells every writer of the turn that the server has routed its position. At
   * many writes a turn (pings at concurrency) that is one round trip, not one each.
   */
  let turn: { positions: Map<string, number>; inbound: Map<string, number>; routed: Promise<void> } | null = null;
  const announce = (orgId: string, seq: number, log: 'events' | 'inbound'): Promise<void> => {
    if (!turn) {
      const positions = new Map<string, number>();
      const inbound = new Map<string, number>();
      const routed = new Promise<void>((resolve) => setImmediate(() => {
        turn = null;
        for (const [org, at] of positions) nats.nc.publish(SUBJECTS.written, positionText({ kind: 'events', orgId: org, seq: at }));
        for (const [org, at] of inbound) nats.nc.publish(SUBJECTS.written, positionText({ kind: 'inbound', orgId: org, seq: at }));
        nats.nc.flush().catch(() => {}).then(resolve);
      }));
      turn = { positions, inbound, routed };
    }
    const map = log === 'events' ? turn.positions : turn.inbound;
    if (seq > (map.get(orgId) ?? 0)) map.set(orgId, seq);
    return turn.routed;
  };

  const caughtUp = async (orgId: string): Promise<void> => {
    const inbound = unrouted.get(orgId);
    if (inbound !== undefined && inbound > router.at) {
      // The router announces the EVENTS positions it wrote before how far it got: once it passed this, `written` knows them.
      if (!(await router.waitFor(inbound, READ_WAIT_MS))) unrouted.delete(orgId); // no router answering: later reads do not wait again
    }
    const seq = written.get(orgId);
    if (seq !== undefined && seq > watermark.seq) await watermark.waitFor(seq, READ_WAIT_MS);
  };

  return {
    /** A write of `orgId` is stored at `seq`: reads of the organization, in any API process, include it once this resolves. */
    wrote(orgId: string, seq: number): Promise<void> {
      if (!(seq > 0)) return Promise.resolve();
      raise(orgId, seq);
      return announce(orgId, seq, 'events');
    },
    /**
     * An inbound request of `orgId` is stored at INBOUND `seq` for the router to record:
     * reads of the organization, in any API process, wait for the router to pass it.
     */
    wroteInbound(orgId: string, seq: number): Promise<void> {
      if (!(seq > 0)) return Promise.resolve();
      raiseUnrouted(orgId, seq);
      return announce(orgId, seq, 'inbound');
    },
    /** Resolves once the read models include every write of `orgId` this process knows of (bounded). */
    caughtUp,
    /** The projector's position as this process last heard it. */
    get projected(): number {
      return watermark.seq;
    },
    /** For reads (GET, HEAD): the handler runs once the organization's writes are projected. */
    beforeReads(req: Request, _res: Response, next: NextFunction): void {
      if (req.method !== 'GET' && req.method !== 'HEAD') return next();
      barrier().then(() => caughtUp((req as AuthedRequest).orgId)).then(() => next(), next);
    },
    close(): void {
      clearInterval(sweep);
      router.close();
      sub.unsubscribe();
    },
  };
}


export type ReadYourWrites = ReturnType<typeof createReadYourWrites>;
