/** What a decider needs from the outside world, passed in so deciders stay pure. */
export interface CommandMeta {
  now: string;
  nowMs: number;
  /** The id of the (first) event decided; a decision of several events names the others itself. */
  eventId: string;
  /** JETCRON_TIME_SCALE applied to service-counted waits. */
  scaleWait(ms: number): number;
  newId(prefix: 'tsk' | 'exe' | 'sch' | 'mon' | 'png' | 'ep' | 'evt' | 'chn'): string;
}

/**
 * The same moment under another event id (each of a decision's parts names its own
 * event). Written out rather than spread: `eventId` may be a getter that makes an id
 * when read, and a spread would read it (an id made and thrown away per part).
 */
export const withEventId = (meta: CommandMeta, eventId: string): CommandMeta =>
  ({ now: meta.now, nowMs: meta.nowMs, eventId, scaleWait: meta.scaleWait, newId: meta.newId });
