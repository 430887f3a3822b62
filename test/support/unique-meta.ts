import type { CommandMeta } from '../../src/commands/meta.ts';

let n = 0;

/** Time as given and ids unique across every call of the test file (tasks made one by one, each its own). */
export function uniqueMeta(nowMs: number): CommandMeta {
  const id = () => `${(n++).toString().padStart(6, '0')}`;
  return { nowMs, now: new Date(nowMs).toISOString(), eventId: `evt_${id()}`, scaleWait: (ms) => ms, newId: (prefix) => `${prefix}_${id()}` };
}
