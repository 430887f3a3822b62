import { trace } from '@opentelemetry/api';
import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';

/**
 * The process's log: JSON lines (pino) with `level`, `time`, `role` and the ids a line
 * is about (`org_id`, `task_id`, `execution_id`, `attempt`, `endpoint_id`, …), plus the
 * active trace's `trace_id`/`span_id` when tracing is on; on a terminal the same lines
 * readable. `LOG_LEVEL` (trace, debug, info, warn, error; default info) chooses.
 *
 * Secrets are kept out by construction (no line carries headers, bodies or
 * configuration) and by redaction of the field names that could hold one, should a
 * caller pass an object that has them.
 */
export type LogFields = Record<string, unknown>;
export interface Log {
  (message: string, fields?: LogFields): void;
  /** A debug line about one unit of work; `fields` is built only when debug lines are on (`LOG_LEVEL=debug`). */
  debug?: (message: string, fields: () => LogFields) => void;
}

export const REDACTED_FIELDS = [
  'authorization', 'api_key', 'apiKey', 'secret', 'secrets', 'webhook_secret', 'password', 'token', 'headers', 'body',
  '*.authorization', '*.api_key', '*.apiKey', '*.secret', '*.secrets', '*.webhook_secret', '*.password', '*.token', '*.headers', '*.body',
];

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

export interface LoggerOptions {
  /** The roles of this process, e.g. "api" or "projector,scheduler,dispatcher,notifier". */
  role: string;
  level?: string | undefined;
  /** Default: stderr. */
  destination?: NodeJS.WritableStream & { isTTY?: boolean };
  /** Readable lines instead of JSON; default: when the destination is a terminal. */
  pretty?: boolean;
}

export function createLogger(opts: LoggerOptions): Logger {
  const level = opts.level && LEVELS.has(opts.level.toLowerCase()) ? opts.level.toLowerCase() : 'info';
  const destination = opts.destination ?? process.stderr;
  const readable = opts.pretty ?? !!destination.isTTY;
  const options = {
    level,
    base: { role: opts.role, pid: process.pid },
    redact: { paths: REDACTED_FIELDS, censor: '***' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    // The trace a line belongs to, read only when a span is active (tracing off: none is).
    mixin() {
      const span = trace.getActiveSpan();
      if (!span) return {};
      const c = span.spanContext();
      return { trace_id: c.traceId, span_id: c.spanId };
    },
  };
  const stream = readable
    ? pretty({ destination, colorize: !!destination.isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,role', messageFormat: '[{role}] {msg}', singleLine: true, sync: true })
    : destination;
  return pino(options, stream);
}

/**
 * The `log(message)` every module is handed, over a pino logger: a line that starts
 * with "ERROR" is an error, one that starts with "WARN" a warning, the rest info.
 */
export function logFunction(logger: Logger): Log {
  const log: Log = (message, fields) => {
    if (message.startsWith('ERROR')) logger.error(fields ?? {}, message.replace(/^ERROR:?\s*/, ''));
    else if (message.startsWith('WARN')) logger.warn(fields ?? {}, message.replace(/^WARN(ING)?:?\s*/, ''));
    else logger.info(fields ?? {}, message);
  };
  const debugOn = logger.isLevelEnabled('debug');
  if (debugOn) log.debug = (message, fields) => logger.debug(fields(), message);
  return log;
}
