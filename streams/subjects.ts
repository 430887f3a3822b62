/**
 * Subject names of every stream and core NATS subject: plain strings, so the domain
 * core can name the subjects it writes without importing the NATS client.
 * docs/architecture.md, "Subjects", explains each.
 */
export const SUBJECTS = {
  org: (org: string) => `evt.${org}.org`,
  apiKey: (publicId: string) => `evt.apikey.${publicId}`,
  task: (org: string, id: string) => `evt.${org}.task.${id}`,
  /** A batch: one commit of its tasks' creates and its `BatchAccepted` (before 2026-11-26: the `BatchAccepted` alone). */
  batch: (org: string, batchId: string) => `evt.${org}.batch.${batchId}`,
  /**
   * Single creates' commits (one per organization and loop turn of an API process), on
   * one of `CREATE_SHARDS` subjects per organization chosen by the commit's id: the
   * subjects grow with organizations, not with commits (each subject costs nats-server
   * memory for as long as its messages are kept). A task's id names its commit's id, and
   * that id a sequence to read the shard on from (`withSeqHint`). Before 2026-11-26 such
   * a commit had a subject of its own (`batch`).
   */
  creates: (org: string, commitId: string) => `evt.${org}.creates.${createShard(commitId)}`,
  execution: (org: string, id: string) => `evt.${org}.exec.${id}`,
  /** A partition owner's claims and result commits, each guarded by the one before (fencing). */
  partition: (partition: number) => `evt.partition.${partition}`,
  /** One notification's delivery records (`NotificationSent` / `NotificationFailed`). */
  notification: (org: string, id: string) => `evt.${org}.notify.${id}`,
  /** The notifier's journal of failure/recovery transitions (NOTIFY_STATE stream). */
  notifyStateJournal: 'notifier.state',
  /** A notification delivery that is due (NOTIFY stream). */
  notify: (org: string) => `notify.${org}.send`,
  endpoint: (org: string, id: string) => `evt.${org}.endpoint.${id}`,
  /** A schedule's changes, ticks and triggers. */
  schedule: (org: string, id: string) => `evt.${org}.schedule.${id}`,
  /** Every schedule's subject: a task owner taking over reads the last of each (its schedules, as they are now). */
  schedules: 'evt.*.schedule.*',
  /** An organization's notification channels, one aggregate: each event carries the whole set (one direct get loads it). */
  channels: (org: string) => `evt.${org}.channels`,
  /** An organization's bulk retry jobs, one aggregate (its latest job): one running at a time, each step a guarded append. */
  jobs: (org: string) => `evt.${org}.jobs`,
  /** Every organization's jobs subject: the retry-job worker finds running jobs by their last events. */
  allJobs: 'evt.*.jobs',
  /**
   * Core NATS (not stored), `<org> <seq>`: an API process accepted a bulk job at that
   * sequence. The jobs' worker looks for it as soon as the projector has it, not at its
   * next poll (`src/jobs/job-wakeups.ts`).
   */
  jobAccepted: 'jetcron.jobs.accepted',
  /** Every organization's channels subject: the notifier's channel directory follows them. */
  allChannels: 'evt.*.channels',
  /** Every monitor's subject: a monitor owner taking over reads the last of each. */
  monitors: 'evt.*.monitor.*',
  /** A monitor partition owner's claims and commits of pings and goings down, each guarded by the one before (fencing). */
  monitorPartition: (partition: number) => `evt.monitor-partition.${partition}`,
  /** Core NATS request: a monitor partition's commands (pings, pauses, changes), answered by its owner once stored. */
  monitorOwner: (partition: number) => `jetcron.monitor-owner.${partition}`,
  /** A flow-control key's pause and resume (the key's SHA-256, so any text is a token). */
  flowKey: (org: string, keyHash: string) => `evt.${org}.flow.${keyHash}`,
  /** Every key's subject: an owner taking over reads the last of each (is it paused?). */
  flowKeys: 'evt.*.flow.*',
  /** Core NATS request: each process answers with the flow-control keys of the partitions it owns (`GET /flow-control`). */
  flowStats: 'jetcron.flow-control.stats',
  /** One inbound event's forwarding records (`InboundEventReceived`, `InboundEventReplayed`). */
  inboundEvent: (org: string, eventId: string) => `evt.${org}.inbound.${eventId}`,
  /**
   * The `InboundEventReceived` commits the receiver appends itself (requests no hook
   * touches: no router hop), one per INBOUND group, on one of
   * `CREATE_SHARDS` subjects per organization chosen by the group's id: subjects grow
   * with organizations, not with requests. msg id = the commit's last event id, so a
   * retried append is one message.
   */
  inboundReceived: (org: string, commitId: string) => `evt.${org}.inbound-received.${createShard(commitId)}`,
  /** An endpoint's debounce window for one transform() `debounce_key` (its SHA-256, so any text is a token). */
  inboundDebounce: (org: string, endpointId: string, keyHash: string) => `evt.${org}.inbound-debounce.${endpointId}.${keyHash}`,
  /** An inbound request as received (INBOUND stream). */
  inbound: (org: string, endpointId: string) => `inbound.${org}.${endpointId}`,
  /** Core NATS (not stored): the projector's progress, for read-your-writes. */
  projected: 'jetcron.projected',
  /** An API process wrote `<org> <seq>`: reads of that organization wait for it in every API process. */
  written: 'jetcron.written',
  /** Core NATS, `.<group>` appended: the consumers of each process of one split `serve` and where they stand, every 2 s, for its /healthz. */
  progress: 'jetcron.progress',
  /** Core NATS: API processes announce themselves so each takes its share of the rate limit. */
  apiPresence: 'jetcron.presence.api',
  /** Core NATS request: every service process answers with who it is and its roles (`jetcron status`). */
  rollCall: 'jetcron.processes',
} as const;

/** Whether a subject is a monitor's, `evt.<org>.monitor.<mon>` (an organization id has no dot): a test on the name, no split. */
export function isMonitorSubject(subject: string): boolean {
  const dot = subject.indexOf('.', 4);
  return subject.startsWith('evt.') && subject.startsWith('monitor.', dot + 1) && subject.indexOf('.', dot + 9) === -1;
}

/** Subjects per organization for single creates' commits (`SUBJECTS.creates`). */
export const CREATE_SHARDS = 16;

/** FNV-1a of the commit id, folded to a shard: the same id always names the same subject. */
function createShard(commitId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < commitId.length; i++) h = Math.imul(h ^ commitId.charCodeAt(i), 0x01000193);
  return (h >>> 0) % CREATE_SHARDS;
}
