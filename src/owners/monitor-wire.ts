import type { MonitorCommand } from '../commands/monitor/decide.ts';
import type { Monitor, MonitorEvent } from '../commands/monitor/types.ts';

/**
 * One command for a monitor partition's owner. `request_id` is the id its event gets, made
 * once by the asking API process and sent again unchanged on a retry, so a command the
 * owner stored before it could answer (a kill -9, a takeover) is answered from the log,
 * never recorded twice.
 */
export interface MonitorRequest {
  org_id: string;
  id: string;
  request_id: string;
  command: MonitorCommand;
}

/** What the owner answers each command with, once its events are stored. */
export type MonitorReply =
  /** Stored at `seq`; `state` when it decided nothing (the monitor as held). */
  | { seq: number; events: MonitorEvent[]; state?: Monitor | null }
  /** The decider's refusal (the contract's answer). */
  | { error: { status: number; message: string; field: string | null; headers: Record<string, string> } }
  /** Not answered here (this owner is stopping or fenced, the store unreachable): ask again. */
  | { retry: string };

export interface MonitorRequests {
  items: MonitorRequest[];
}

export interface MonitorReplies {
  answers: MonitorReply[];
}
