import {
  DEFAULT_MAX_QUEUED, DEFAULT_MEMORY_BYTES, DEFAULT_QUEUE_WAIT_MS, DEFAULT_TIMEOUT_MS, DEFAULT_WORKERS, ERROR_BYTES,
  HARD_STOP_GRACE_MS, JSON_DEPTH, LOG_LINE_BYTES, LOG_LINES, RESULT_BYTES, RESULT_VALUES, memoryLimitMessage, timeLimitMessage,
  type ScriptLimits,
} from './limits.ts';
import { createWorkerPool, type PoolStats } from './pool.ts';
import type { PoolAnswer, WorkerRequest } from './protocol.ts';

/**
 * The script engine: Lua 5.4 (wasmoon) in a small pool of worker threads, each call in
 * a sandbox of its own with a time and a memory limit. See docs in sandbox-lua.ts
 * (what a script can reach), worker.ts (the Lua state) and pool.ts (the limits the
 * main thread enforces).
 */
export interface ScriptCall {
  script: string;
  /** The global function to call, e.g. "verify" or "on_response". */
  hook: string;
  /** Plain JSON values; each becomes one argument (null becomes nil). */
  args: unknown[];
}

export interface ScriptOutcome {
  /** The hook's return values as JSON values (nil → null); [] on an error or a missing hook. */
  result: unknown[];
  /** What `log`/`print` wrote, at most 100 lines of at most 1 KB (a cut or dropped line says so). */
  logs: string[];
  /** From handing the call to a worker to its answer (the wait for a free worker excluded). */
  duration_ms: number;
  /** The Lua error with its line (`script:3: ...`), a limit message, or null. */
  error: string | null;
  /** The script does not define the hook: not an error (the caller passes through). */
  missing?: boolean;
  /**
   * The engine could not run the call (every worker busy past the wait, closed, not
   * starting): the service's state, not the script's fault. `error` says which; the
   * caller may try again later instead of holding it against the script.
   */
  unavailable?: boolean;
}

const UNAVAILABLE = /^script engine (busy|closed|cannot start)/;

/**
 * `check` could not run the script at all (see `unavailable`): no verdict on it. Its
 * name marks it transient (src/lib/transient.ts): the API answers 503 with Retry-After.
 */
export class ScriptEngineUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScriptEngineUnavailableError';
  }
}

export interface ScriptEngine {
  run(call: ScriptCall): Promise<ScriptOutcome>;
  /**
   * Loads the script and runs its top level (under the same limits): null when that
   * works and the script defines at least one of `hooks` (each one it defines is a
   * function); else the message, e.g. `script:3: unexpected symbol near 'x'` or
   * "defines none of verify, filter, transform, route". Throws
   * ScriptEngineUnavailableError when the engine cannot run it (busy, closed).
   */
  check(script: string, hooks: readonly string[]): Promise<string | null>;
  stats(): PoolStats;
  /** Stops the workers; calls in flight or waiting answer "script engine closed", later calls reject. */
  close(): Promise<void>;
}

export interface ScriptEngineOptions {
  /** Worker threads, each one call at a time (default 2). */
  workers?: number;
  /** Wall time per call (default 100). */
  timeoutMs?: number;
  /** Lua memory per call (default 16 MiB). */
  memoryBytes?: number;
  /** A call waits at most this long for a free worker (default 2000). */
  queueWaitMs?: number;
  /** Calls waiting beyond this many answer "busy" at once (default 1000). */
  maxQueued?: number;
  /**
   * How long after the time limit the main thread terminates a worker whose script did
   * not stop itself (default HARD_STOP_GRACE_MS). A machine so busy that a worker thread
   * is not scheduled within it loses the worker (and the call's logs) though the
   * script would have stopped itself; tests of the in-worker stop set it out of the way.
   */
  hardStopGraceMs?: number;
  /** Told of every call once it is answered (the service counts them; this module knows no metrics). */
  observe?: (call: ScriptCallObservation) => void;
}

/** `unavailable`: the engine could not run the call; `timeout` and `memory`: a limit hit; `error`: any other error. */
export type ScriptCallResult = 'ok' | 'error' | 'timeout' | 'memory' | 'unavailable';

export interface ScriptCallObservation {
  /** The hook called, or `check` for a script checked on save. */
  hook: string;
  result: ScriptCallResult;
  /** Time in a worker (see ScriptOutcome.duration_ms); 0 for a call that did not run. */
  seconds: number;
}

export function createScriptEngine(opts: ScriptEngineOptions = {}): ScriptEngine {
  const limits: ScriptLimits = { timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, memoryBytes: opts.memoryBytes ?? DEFAULT_MEMORY_BYTES };
  const timeMessage = timeLimitMessage(limits);
  const memoryMessage = memoryLimitMessage(limits);
  const luaConfig = JSON.stringify({
    timeout_ms: limits.timeoutMs,
    // The time limit's instruction hook runs every this many VM instructions (a few µs).
    hook_every: 1000,
    log_lines: LOG_LINES,
    log_line_bytes: LOG_LINE_BYTES,
    error_bytes: ERROR_BYTES,
    result_bytes: RESULT_BYTES,
    result_values: RESULT_VALUES,
    json_depth: JSON_DEPTH,
    time_message: timeMessage,
    memory_message: memoryMessage,
  });
  const pool = createWorkerPool({
    workers: Math.max(1, opts.workers ?? DEFAULT_WORKERS),
    hardStopMs: limits.timeoutMs + (opts.hardStopGraceMs ?? HARD_STOP_GRACE_MS),
    timeMessage,
    memoryMessage,
    queueWaitMs: opts.queueWaitMs ?? DEFAULT_QUEUE_WAIT_MS,
    maxQueued: opts.maxQueued ?? DEFAULT_MAX_QUEUED,
    worker: { memoryBytes: limits.memoryBytes, memoryMessage, luaConfig },
  });

  // The script and its arguments enter the Lua state before any Lua code runs, where a
  // memory error would be fatal to the state: keep them well inside the limit.
  const maxInputBytes = Math.floor(limits.memoryBytes / 2);
  const submit = (call: Omit<WorkerRequest, 'id'>): Promise<PoolAnswer> => {
    const bytes = Buffer.byteLength(call.script) + Buffer.byteLength(call.payload);
    if (bytes > maxInputBytes) {
      return Promise.resolve({ failure: `script and arguments too large: ${bytes} bytes (at most ${maxInputBytes})`, elapsedMs: 0 });
    }
    return pool.submit(call);
  };

  const told = (hook: string, out: ScriptOutcome): ScriptOutcome => {
    if (!opts.observe) return out;
    const result: ScriptCallResult = out.unavailable ? 'unavailable'
      : out.error === null ? 'ok'
      : out.error === timeMessage ? 'timeout'
      : out.error === memoryMessage ? 'memory'
      : 'error';
    opts.observe({ hook, result, seconds: out.duration_ms / 1000 });
    return out;
  };

  return {
    async run(call) {
      return told(call.hook, outcomeOf(await submit({ kind: 'run', script: call.script, hook: call.hook, payload: JSON.stringify(call.args) })));
    },
    async check(script, hooks) {
      const out = told('check', outcomeOf(await submit({ kind: 'check', script, hook: '', payload: JSON.stringify(hooks) })));
      if (out.unavailable) throw new ScriptEngineUnavailableError(out.error!);
      return out.error;
    },
    stats: () => pool.stats(),
    close: () => pool.close(),
  };
}

/** The prelude's answer: {result, logs} | {missing, logs} | {error, logs} (check: {} | {error}). */
interface LuaAnswer {
  result?: unknown[];
  logs?: string[];
  missing?: boolean;
  error?: string;
}

function outcomeOf(answer: PoolAnswer): ScriptOutcome {
  const duration_ms = Math.round(answer.elapsedMs * 100) / 100;
  if ('failure' in answer) {
    return { result: [], logs: [], duration_ms, error: answer.failure, ...(UNAVAILABLE.test(answer.failure) ? { unavailable: true } : {}) };
  }
  let parsed: LuaAnswer;
  try {
    parsed = JSON.parse(answer.text) as LuaAnswer;
  } catch {
    return { result: [], logs: [], duration_ms, error: 'script engine failure: unreadable answer' };
  }
  const logs = Array.isArray(parsed.logs) ? parsed.logs : [];
  if (typeof parsed.error === 'string') return { result: [], logs, duration_ms, error: parsed.error };
  if (parsed.missing) return { result: [], logs, duration_ms, error: null, missing: true };
  return { result: Array.isArray(parsed.result) ? parsed.result : [], logs, duration_ms, error: null };
}

/**
 * An engine whose worker threads start on its first call: most processes (and most
 * tests) never run a script, and each worker holds its own Lua state.
 */
export function lazyScriptEngine(opts: ScriptEngineOptions = {}): ScriptEngine {
  let engine: ScriptEngine | undefined;
  let closed = false;
  const get = () => {
    if (closed) throw new Error('script engine closed');
    return (engine ??= createScriptEngine(opts));
  };
  return {
    run: async (call) => get().run(call),
    check: async (script, hooks) => get().check(script, hooks),
    stats: () => engine?.stats() ?? { workers: 0, ready: 0, busy: 0, queued: 0, replaced: 0 },
    async close() {
      closed = true;
      await engine?.close();
    },
  };
}
