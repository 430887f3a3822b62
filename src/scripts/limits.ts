/**
 * What one script call may use, and the messages a limit hit answers with. The
 * contract fixes the defaults (100 ms, 16 MB, 100 log lines of 1 KB); the engine's
 * options may lower or raise the first two (tests do).
 */
export const DEFAULT_TIMEOUT_MS = 100;
export const DEFAULT_MEMORY_BYTES = 16 * 1024 * 1024;
export const DEFAULT_WORKERS = 2;

/** `log`/`print` lines kept per call, and bytes kept per line (the cut or drop is said in the line). */
export const LOG_LINES = 100;
export const LOG_LINE_BYTES = 1024;
/** An error message longer than this is cut (it becomes a `script_logs` line). */
export const ERROR_BYTES = 1024;
/** The hook's return values as JSON text: more is an error (the main thread parses it: ~10 ms at worst). */
export const RESULT_BYTES = 2 * 1024 * 1024;
/** ... and at most this many JSON values: parsing many small values is what costs the main thread. */
export const RESULT_VALUES = 10_000;
/** Nesting depth `json.encode`/`json.decode` (and the conversion of results) accept. */
export const JSON_DEPTH = 200;

/**
 * The worker's hard stop comes this long after the call's time limit: inside the
 * worker an instruction hook ends a runaway Lua loop at the limit itself (and the
 * worker lives on); the main thread terminates the worker only when that did not
 * happen, e.g. a long C call (`string.find` with a pathological pattern).
 */
export const HARD_STOP_GRACE_MS = 50;
/** A call that waits this long for a free worker fails instead of queueing on. */
export const DEFAULT_QUEUE_WAIT_MS = 2_000;
export const DEFAULT_MAX_QUEUED = 1_000;

/**
 * V8 heap limits of each worker. Lua's own memory lives in the WebAssembly memory,
 * outside the V8 heap, and is bounded by the Lua allocator (`memoryBytes`); these bound
 * the JavaScript side (the JSON texts crossing the thread boundary, wasmoon itself).
 */
export const WORKER_RESOURCE_LIMITS = { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 } as const;

export interface ScriptLimits {
  timeoutMs: number;
  memoryBytes: number;
}

export const timeLimitMessage = (l: ScriptLimits) => `script took longer than ${l.timeoutMs} ms`;
export const memoryLimitMessage = (l: ScriptLimits) => `script exceeded the ${formatBytes(l.memoryBytes)} memory limit`;

function formatBytes(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  if (Number.isInteger(mib)) return `${mib} MB`;
  const kib = bytes / 1024;
  return Number.isInteger(kib) ? `${kib} KB` : `${bytes} bytes`;
}
