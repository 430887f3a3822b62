/**
 * The partition of a unit of order: a lane or flow-control key, or (lane-free) the task
 * itself. FNV-1a over `<org>\n<key>`: stable across processes and versions, so every
 * process agrees on who owns what. Changing the number of partitions moves units, so
 * it is fixed for a deployment.
 */
export function partitionOf(orgId: string, key: string, partitions: number): number {
  let h = 0x811c9dc5;
  const text = `${orgId}\n${key}`;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % partitions;
}

/** A task's unit of order: its lane when it has one (a lane runs in one partition), else the task. */
export function taskPartition(task: { org_id: string; id: string; lane: string | null }, partitions: number): number {
  return partitionOf(task.org_id, task.lane ? `lane ${task.lane}` : `task ${task.id}`, partitions);
}
