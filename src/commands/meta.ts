/** What a decider needs from the outside world, passed in so deciders stay pure. */
export interface CommandMeta {
  now: string;
  nowMs: number;
  /** The id of the (first) event decided; a decision of several events names the others itself. */
  eventId: string;
  /** JETCRON_TIME_SCALE applied to service-counted waits. */
  scaleWait(ms: number): number;
  newId(prefix: 'tsk' | 'exe' | 'sch' | 'mon' | 'png' | 'ep' | 'evt'): string;
}
