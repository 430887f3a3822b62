import type { CallbackJob, InboundRef } from './job.ts';
import type { Envelope } from '../envelope.ts';

export type ExecutionStatus = 'pending' | 'running' | 'success' | 'failed' | 'timeout' | 'cancelled';
export type SourceType = 'task' | 'schedule' | 'endpoint' | 'monitor';

export interface ExecutionSource {
  type: SourceType;
  id: string;
  name: string;
}

export interface SentRequest {
  method: string;
  url: string;
  /** As sent; secret-looking values masked as "***". */
  headers: Record<string, string>;
  /** At most 256 KB is recorded (`body_truncated`); a body that is not UTF-8 is recorded as base64. */
  body: string | null;
  body_encoding?: 'base64';
  body_truncated?: boolean;
}

export interface AttemptResult {
  execution_id: string;
  source: ExecutionSource;
  attempt: number;
  status: 'success' | 'failed' | 'timeout';
  status_code: number | null;
  error_message: string | null;
  scheduled_for: string;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  request: SentRequest;
  response_body: string | null;
  /** `base64` when the body is not storable as text (not UTF-8, or holds NUL); absent = utf8. */
  response_body_encoding?: 'base64';
  response_truncated: boolean;
  response_headers: Record<string, string> | null;
  script_logs: string[];
  /** Set when another attempt will follow; the execution stays pending until then. */
  next_attempt_at: string | null;
  /**
   * This attempt ended the execution: no other attempt follows. What every reader takes
   * as "over" (the read model's status, notifications, the owners, metrics), decided
   * once by `decideAttemptResult`; events of version 1 get it from `next_attempt_at`.
   */
  final: boolean;
  callback_url: string | null;
  push_callback_url: string | null;
  /** The lane the execution held; it is released when the execution ends for good. */
  lane?: string | null;
  /**
   * Attempts so far, this one included, that answered 429 and so did not use one of
   * the task's retries (per-host backoff). Absent = 0.
   */
  uncounted_attempts?: number;
  /** An endpoint execution: where its request is, so a retry can be built again (without the plan's values). */
  inbound?: Pick<InboundRef, 'event_id' | 'seq' | 'origin_seq'>;
  /** See `LateMark`. */
  late?: true;
}

/**
 * `late: true`: recorded by an owner that was fenced when its answer came (another owner
 * had claimed the partition while the request was out), on the execution's own subject.
 * History only: no reader takes it as the execution's state, whose next owner may have
 * settled the execution since. That owner adopts it (`late-results.ts`) when the
 * execution still waits for that very attempt, so the request is not sent again.
 */
export interface LateMark {
  late?: true;
}

/** An attempt due while its host was blocked for the organization: not sent, held by its owner until the block ends. */
export interface AttemptDeferral {
  execution_id: string;
  source: ExecutionSource;
  attempt: number;
  /** The block's end: when the attempt will run. */
  scheduled_for: string;
  reason: string;
  /** `hostname:port` of the target. */
  host: string;
  /** As in AttemptResult, carried forward (absent = 0). */
  uncounted_attempts?: number;
}

export type ExecutionEvent =
  | Envelope<
      'AttemptStarted',
      { execution_id: string; source: ExecutionSource; attempt: number; started_at: string; scheduled_for: string; uncounted_attempts?: number }
    >
  | Envelope<'AttemptFinished', AttemptResult>
  | Envelope<'AttemptDeferred', AttemptDeferral>
  | Envelope<'ExecutionCancelled', { execution_id: string; source: ExecutionSource; reason: string; lane?: string | null }>
  | Envelope<
      'CallbackAttempted',
      {
        execution_id: string;
        url: string;
        attempt: number;
        status_code: number | null;
        error_message: string | null;
        next_attempt_at: string | null;
        /** The delivery as sent, so a retry sends the same body. */
        job: CallbackJob;
      } & LateMark
    >;
