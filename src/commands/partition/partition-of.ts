/**
 * The partition of a unit of order: a lane or flow-control key, or (lane-free) the task
 * itself. FNV-1a over `<org>\n<key>`: stable across processes and versions, so every
 * process agrees on who owns what. Changing the number of partitions moves units, so
 * it is fixed for a deployment.
 */
export function partitionOf(orgId: string, key: string, partitions: number, keyPrefix = ''): number {
  // `<org>\n<prefix><key>` hashed piece by piece: no string built per call (every create and ping asks).
  const h = fnv(fnv(fnv(fnv(0x811c9dc5, orgId), '\n'), keyPrefix), key);
  return (h >>> 0) % partitions;
}

/** FNV-1a over `text`'s UTF-16 code units, from hash `h`. */
function fnv(h: number, text: string): number {
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h;
}

/** A task's unit of order: its lane or its flow-control key when it has one (a key runs in one partition), else the task. */
export function taskPartition(task: { org_id: string; id: string; lane: string | null; flow_control?: { key: string } | null }, partitions: number): number {
  if (task.lane) return partitionOf(task.org_id, task.lane, partitions, 'lane ');
  if (task.flow_control) return flowKeyPartition(task.org_id, task.flow_control.key, partitions);
  return partitionOf(task.org_id, task.id, partitions, 'task ');
}

/** A flow-control key's unit (`flow <key>`): every task naming it, and its pause, belong to one partition. */
export const flowKeyPartition = (orgId: string, key: string, partitions: number): number => partitionOf(orgId, key, partitions, 'flow ');

/** An endpoint's deliveries, its pause and its lane or key: one partition. */
export const endpointPartition = (orgId: string, endpointId: string, partitions: number): number => partitionOf(orgId, endpointId, partitions, 'endpoint ');

/** A monitor's pings, goings down and changes: one partition of the monitors' owners. */
export const monitorPartition = (orgId: string, monitorId: string, partitions: number): number => partitionOf(orgId, monitorId, partitions, 'monitor ');

/** A schedule's ticks and their executions: one partition of the task owners. */
export const schedulePartition = (orgId: string, scheduleId: string, partitions: number): number => partitionOf(orgId, scheduleId, partitions, 'schedule ');
