/** The messages between the pool (main thread) and a script worker. Only strings cross into Lua. */

/** What a worker needs to build its Lua state; sent once as `workerData`. */
export interface WorkerConfig {
  /** The Lua allocator's allowance on top of what the prelude keeps. */
  memoryBytes: number;
  /** The answer when the Lua state runs out of memory outside the prelude's own error handling. */
  memoryMessage: string;
  /** The prelude's `init` argument, as JSON text (see sandbox-lua.ts). */
  luaConfig: string;
}

/** One call. `payload` is JSON text: the hook's arguments (run) or the hook names (check). */
export interface WorkerRequest {
  id: number;
  kind: 'run' | 'check';
  script: string;
  hook: string;
  payload: string;
}

export type WorkerMessage =
  | { type: 'ready' }
  /**
   * `text`: the prelude's JSON answer (see sandbox-lua.ts). `fatal`: the Lua state
   * failed outside the prelude's error handling; the worker ends itself and takes no
   * more calls.
   */
  | { type: 'done'; id: number; text: string; fatal?: true };

/** The answer of one call as the pool gives it: the prelude's JSON text, or why there is none. */
export type PoolAnswer = { text: string; elapsedMs: number } | { failure: string; elapsedMs: number };
