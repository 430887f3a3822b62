/**
 * The worker thread's side: one Lua state (wasmoon), built once, serving one call at a
 * time, synchronously.
 *
 * The state is created with wasmoon's JS interop cut down to nothing a script can
 * reach: no injected objects (`Promise`, `Error`, `null` globals), no proxies. The
 * one thing of ours set into it is the digest function behind `crypto.*`, which the
 * prelude takes into a local before it empties the globals; the only values that cross
 * are strings (the call in, the JSON answer out, the digests' text). `traceAllocations` routes every Lua allocation through a
 * counting allocator whose maximum is the memory limit.
 */
import { createHash, createHmac } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { LuaFactory } from 'wasmoon';
import type { LuaEngine } from 'wasmoon';
import { SANDBOX_PRELUDE } from './sandbox-lua.ts';
import type { WorkerConfig, WorkerMessage, WorkerRequest } from './protocol.ts';

type Entry = (kind: string, script: string, hook: string, payload: string) => unknown;

interface LuaState {
  engine: LuaEngine;
  entry: Entry;
}

async function createState(config: WorkerConfig): Promise<LuaState> {
  const engine = await new LuaFactory().createEngine({ injectObjects: false, enableProxy: false, traceAllocations: true });
  // The one JS function in the state: the prelude takes it into a local and empties the globals.
  engine.global.set('__jetcron_digest', digest);
  engine.global.loadString(SANDBOX_PRELUDE, '=sandbox');
  const init = engine.global.runSync()[0] as (config: string) => unknown;
  engine.global.setTop(0);
  const entry = init(config.luaConfig);
  if (typeof entry !== 'function') throw new Error('the sandbox prelude did not return its entry function');
  // What the prelude keeps is not the script's to spend: the limit counts from here.
  engine.global.setMemoryMax(engine.global.getMemoryUsed() + config.memoryBytes);
  return { engine, entry: entry as Entry };
}

/**
 * `crypto.*` of the sandbox. The prelude's wrappers pass only checked strings; this
 * never throws (an exception would reach Lua as a JS value).
 */
function digest(algorithm: unknown, key: unknown, message: unknown, encoding: unknown): string {
  try {
    const enc = encoding === 'base64' ? 'base64' : 'hex';
    if (algorithm === 'sha256') return createHash('sha256').update(String(message)).digest(enc);
    if (algorithm === 'hmac-sha256') return createHmac('sha256', String(key)).update(String(message)).digest(enc);
    if (algorithm === 'hmac-sha1') return createHmac('sha1', String(key)).update(String(message)).digest(enc);
  } catch {
    /* answered below */
  }
  return '';
}

function serve(state: LuaState, config: WorkerConfig, port: NonNullable<typeof parentPort>): void {
  const post = (m: WorkerMessage) => port.postMessage(m);
  let broken = false;
  port.on('message', (req: WorkerRequest) => {
    if (broken) return;
    let text: unknown;
    try {
      text = state.entry(req.kind, req.script, req.hook, req.payload);
    } catch (err) {
      // The prelude answers every script error itself; landing here means the state
      // itself failed (out of memory outside any pcall, a wasm trap). Its state is not
      // to be trusted again: answer, then end this worker so the pool starts another.
      const message = err instanceof Error ? err.message : String(err);
      const error = message.includes('not enough memory') ? config.memoryMessage : `script engine failure: ${lastLine(message)}`;
      post({ type: 'done', id: req.id, text: JSON.stringify({ error, logs: [] }), fatal: true });
      setImmediate(() => process.exit(1));
      broken = true;
      return;
    }
    post({ type: 'done', id: req.id, text: String(text) });
  });
  post({ type: 'ready' });
}

const lastLine = (message: string) => message.split('\n')[0] ?? message;

if (parentPort) {
  const port = parentPort;
  const config = workerData as WorkerConfig;
  createState(config).then(
    (state) => serve(state, config, port),
    (err: unknown) => {
      // The pool sees the exit before any 'ready' and counts a failed start.
      console.error(`script worker: cannot start: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    },
  );
}
