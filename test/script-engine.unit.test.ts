import { createHash, createHmac } from 'node:crypto';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createScriptEngine, type ScriptCallObservation, type ScriptEngine, type ScriptOutcome } from '../src/scripts/engine.ts';
import { eventually } from './support/wait.ts';

// Real wasmoon in real worker threads. Which limit ends a call must not depend on the
// machine's speed (a busy machine runs a trivial call for more than 100 ms), so:
// - `engine` (two workers) and `single` (one, so two calls surely share a Lua state) have
//   their time limit and queue wait out of the way: they run the tests of behaviour and of
//   the memory limit;
// - `timed` has a time limit and runs the tests of it, with scripts that allocate nothing,
//   which only the time limit can end. Its limit (1 s) leaves a busy machine room to answer
//   the trivial call that checks the engine still serves;
// - the default limits' messages are checked where only that limit can fire.
let engine: ScriptEngine;
let single: ScriptEngine;
let timed: ScriptEngine;
let selfStopped: ScriptEngine;
const ROOMY = 120_000;
const TIME_LIMIT_MS = 1_000;

before(() => {
  engine = createScriptEngine({ workers: 2, timeoutMs: ROOMY, queueWaitMs: ROOMY });
  single = createScriptEngine({ workers: 1, timeoutMs: ROOMY, queueWaitMs: ROOMY });
  timed = createScriptEngine({ workers: 1, timeoutMs: TIME_LIMIT_MS, queueWaitMs: ROOMY });
  // The script stops itself at the limit; the main thread's hard stop is out of the way,
  // so a busy machine that schedules the worker late cannot turn that into a replacement.
  selfStopped = createScriptEngine({ workers: 1, timeoutMs: TIME_LIMIT_MS, queueWaitMs: ROOMY, hardStopGraceMs: ROOMY });
});
after(async () => {
  await Promise.all([engine.close(), single.close(), timed.close(), selfStopped.close()]);
});

const run = (script: string, hook = 'f', args: unknown[] = [], on = engine) => on.run({ script, hook, args });

function ok(o: ScriptOutcome): unknown[] {
  assert.equal(o.error, null, `unexpected error: ${o.error}`);
  return o.result;
}

describe('calls', () => {
  test('a hook gets JSON arguments and returns JSON values', async () => {
    const req = { method: 'POST', path: '/in', query: 'a=1', headers: { 'content-type': 'application/json' }, body: '{"n":1}', source_ip: null };
    const out = await run(
      `function transform(req)
         local body = json.decode(req.body)
         return { method = "PUT", headers = { ["x-n"] = tostring(body.n + 1) }, body = req.body }, req.source_ip, req.query
       end`,
      'transform',
      [req],
    );
    assert.deepEqual(ok(out), [{ method: 'PUT', headers: { 'x-n': '2' }, body: '{"n":1}' }, null, 'a=1']);
    assert.equal(typeof out.duration_ms, 'number');
  });

  test('verify with two results; a hook returning nothing; nil in the middle', async () => {
    assert.deepEqual(ok(await run('function verify(req, secrets) return false, 401 end', 'verify', [{}, null])), [false, 401]);
    assert.deepEqual(ok(await run('function f() end')), []);
    assert.deepEqual(ok(await run('function f() return 1, nil, 3 end')), [1, null, 3]);
  });

  test('Lua values map to JSON: sequences are arrays, other tables objects, numbers keep their kind', async () => {
    const out = await run('function f() return {1, 2, 3}, {a = 1, [2] = "x"}, {}, 0.5, 2^53, -7, "é\\n\\0" end');
    assert.deepEqual(ok(out), [[1, 2, 3], { a: 1, 2: 'x' }, {}, 0.5, 2 ** 53, -7, 'é\n\u0000']);
  });

  test('a value JSON cannot hold is an error', async () => {
    assert.match((await run('function f() return print end')).error ?? '', /^f returned what JSON cannot hold: cannot encode a function/);
    assert.match((await run('function f() local t = {} t.self = t return t end')).error ?? '', /contains itself/);
    assert.match((await run('function f() return 1/0 end')).error ?? '', /cannot encode inf/);
    assert.match((await run('function f() local t = {} for i = 1, 20000 do t[i] = i end return t end')).error ?? '', /more than 10000 values/);
  });

  test('a hook that is not defined is missing, not an error', async () => {
    const out = await run('function verify() return true end log("top level")', 'filter');
    assert.equal(out.error, null);
    assert.equal(out.missing, true);
    assert.deepEqual(out.logs, ['top level']);
    assert.match((await run('filter = 5', 'filter')).error ?? '', /filter is a number, not a function/);
  });

  test('runtime errors carry the script line', async () => {
    const out = await run('local x = 1\n\nfunction f()\n  local t = nil\n  return t.field\nend');
    assert.equal(out.error, "script:5: attempt to index a nil value (local 't')");
    assert.equal((await run('function f() error("boom") end')).error, 'script:1: boom');
    assert.equal((await run('function f() error({code = 1}) end')).error, '(error object is a table value)');
    assert.equal((await run('function f()\n  local v = json.decode("{nope")\nend')).error, 'script:2: json.decode: expected a string key at position 2');
  });

  test('many calls at once are all answered, in any order', async () => {
    const outs = await Promise.all(Array.from({ length: 200 }, (_, i) => run('function f(n) return n * 2 end', 'f', [i])));
    outs.forEach((o, i) => assert.deepEqual(ok(o), [i * 2]));
  });
});

describe('compile errors', () => {
  test('check() and run() report the Lua message with its line', async () => {
    const script = 'function verify(req)\n  return true\nend\nx = = 1';
    assert.equal(await engine.check(script, ['verify']), "script:4: unexpected symbol near '='");
    assert.equal((await run(script, 'verify')).error, "script:4: unexpected symbol near '='");
    assert.equal(await engine.check('function f(\n', ['f']), "script:2: <name> or '...' expected near <eof>");
  });

  test('check() wants at least one of the hooks, each a function, and a top level that runs', async () => {
    const hooks = ['verify', 'filter', 'transform', 'route'];
    assert.equal(await engine.check('function filter(req) return true end', hooks), null);
    assert.equal(await engine.check('local x = 1', hooks), 'defines none of verify, filter, transform, route');
    assert.equal(await engine.check('route = {}', hooks), 'route is a table, not a function');
    assert.equal(await engine.check('function route() end\nerror("no")', hooks), 'script:2: no');
    const defaults = createScriptEngine({ workers: 1, queueWaitMs: ROOMY });
    try {
      // The default limit's message; a loop that allocates nothing can only meet the time limit.
      assert.equal(await defaults.check('while true do end', hooks), 'script took longer than 100 ms');
    } finally {
      await defaults.close();
    }
  });
});

describe('sandbox', () => {
  test('crypto: HMAC-SHA256, HMAC-SHA1 and SHA-256 as node computes them, hex or base64; a constant-time equal', async () => {
    const body = JSON.stringify({ id: 'evt_1', note: 'päckchen ✓', pad: 'x'.repeat(1000) });
    const [h256, h256b64, h1, s256, same, differ, shorter] = ok(await run(`function f(key, body)
      return crypto.hmac_sha256(key, body), crypto.hmac_sha256(key, body, "base64"), crypto.hmac_sha1(key, body),
        crypto.sha256(body), crypto.equal("abc", "abc"), crypto.equal("abc", "abd"), crypto.equal("abc", "ab")
    end`, 'f', ['whsec_ü', body]));
    assert.equal(h256, createHmac('sha256', 'whsec_ü').update(body).digest('hex'));
    assert.equal(h256b64, createHmac('sha256', 'whsec_ü').update(body).digest('base64'));
    assert.equal(h1, createHmac('sha1', 'whsec_ü').update(body).digest('hex'));
    assert.equal(s256, createHash('sha256').update(body).digest('hex'));
    assert.deepEqual([same, differ, shorter], [true, false, false]);
    for (const [call, message] of [
      ['crypto.hmac_sha256(1, "m")', /crypto\.hmac_sha256: argument 1 must be a string, not number/],
      ['crypto.sha256("a\\0b")', /argument 1 must be UTF-8 text without NUL bytes/],
      ['crypto.hmac_sha1("k", "\\255")', /argument 2 must be UTF-8 text/],
      ['crypto.hmac_sha256("k", "m", "raw")', /argument 3 must be "hex" or "base64"/],
    ] as const) {
      const out = await run(`function f()\n  local r = ${call}\n  return r\nend`);
      assert.match(out.error ?? '', message, call);
      assert.match(out.error ?? '', /^script:2: /, 'the error points at the script line');
    }
  });

  test('the environment holds exactly the documented names', async () => {
    const [names] = ok(await run('function f() local n = {} for k in pairs(_G) do n[#n + 1] = k end table.sort(n) return n end'));
    assert.deepEqual(names, [
      '_G', '_VERSION', 'assert', 'crypto', 'error', 'f', 'getmetatable', 'ipairs', 'json', 'log', 'math', 'next', 'pairs', 'pcall', 'print',
      'rawequal', 'rawget', 'rawlen', 'rawset', 'select', 'setmetatable', 'string', 'table', 'tonumber', 'tostring', 'type',
      'unpack', 'utf8', 'xpcall',
    ]);
  });

  test('no way out: dangerous names are nil, JS globals are nil', async () => {
    const names = [
      'io', 'os', 'require', 'load', 'loadstring', 'dofile', 'loadfile', 'debug', 'package', 'collectgarbage', 'coroutine',
      'warn', 'string.dump', 'js', 'window', 'global', 'globalThis', 'self', 'process', 'Promise', 'Error', 'null', 'module',
      'exports', '__dirname', 'jetcron', 'undefined', '__jetcron_digest',
    ];
    const [found] = ok(await run(`function f()
      local found = {}
      for _, name in ipairs(${luaList(names)}) do
        local v = _G
        for part in name:gmatch("[^.]+") do v = type(v) == "table" and rawget(v, part) or nil end
        if v ~= nil then found[#found + 1] = name end
      end
      if ("").dump ~= nil then found[#found + 1] = '("").dump' end
      return found
    end`));
    assert.deepEqual(found, {}, 'an empty table encodes as {}');
  });

  test('the string metatable is out of reach', async () => {
    const out = ok(await run(`function f()
      local ok, err = pcall(setmetatable, "", {})
      return getmetatable(""), getmetatable("x"), ok, err, getmetatable(_G), ("").__index, ("x"):upper()
    end`));
    assert.deepEqual(out, [null, null, false, "bad argument #1 to 'setmetatable' (table expected, got string)", null, null, 'X']);
  });

  test('no finalizers, no binary chunks, no protected metatable changes', async () => {
    assert.equal((await run('function f() setmetatable({}, {__gc = function() end}) end')).error, 'script:1: __gc metamethods are not available');
    assert.equal((await run('\x1bLua')).error, "attempt to load a binary chunk (mode is 't')");
    assert.match((await run('function f() setmetatable(json.null, {}) end')).error ?? '', /protected metatable/);
  });

  test('C stack exhaustion is an error, not a crash', async () => {
    assert.match((await run('function f() local function g(s) return (s:gsub(".", g)) end return g("abc") end')).error ?? '', /stack overflow/);
    assert.match((await run('function f() local t = setmetatable({}, {__index = function(t, k) return t[k] end}) return t.x end')).error ?? '', /stack overflow/);
    assert.deepEqual(ok(await run('function f() return 1 end')), [1]);
  });
});

describe('isolation between calls', () => {
  test('globals, library changes and the random seed do not survive a call, in the same worker', async () => {
    const script = `
      function f(step)
        if step == 1 then
          counter = 1
          string.upper = function() return "hijacked" end
          table.insert = nil
          math.randomseed(42)
          _G.extra = true
          return math.random(1, 1 << 30)
        end
        return counter, string.upper("a"), table.insert ~= nil, extra, math.random(1, 1 << 30)
      end`;
    const [seeded] = ok(await run(script, 'f', [1], single));
    const [counter, upper, insert, extra, random] = ok(await run(script, 'f', [2], single));
    assert.deepEqual([counter, upper, insert, extra], [null, 'A', true, null]);
    assert.notEqual(random, seeded);
    // The seeded sequence is what a seeded call sees (so the comparison above means something).
    assert.deepEqual(ok(await run(script, 'f', [1], single)), [seeded]);
  });
});

describe('isolation between calls (continued)', () => {
  test('the time limit error a __close handler sees is new for each call', async () => {
    const script = `function f(step)
      local ok = pcall(function()
        local guard <close> = setmetatable({}, { __close = function(_, err)
          if type(err) == "table" then log(tostring(rawget(err, "left"))) rawset(err, "left", step) end
        end })
        while true do end
      end)
    end`;
    assert.deepEqual((await run(script, 'f', [1], selfStopped)).logs, ['nil']);
    assert.deepEqual((await run(script, 'f', [2], selfStopped)).logs, ['nil']);
  });
});

describe('logs', () => {
  test('one line per call of log or print, arguments tostring-ed and tab-joined', async () => {
    const out = await run('function f() log("a", 1, nil, true) print("b") log() log(json.null) end');
    assert.deepEqual(out.logs, ['a\t1\tnil\ttrue', 'b', '', 'null']);
  });

  test('at most 100 lines, the last one saying how many were dropped', async () => {
    const out = await run('function f() for i = 1, 150 do log("line", i) end end');
    assert.equal(out.logs.length, 100);
    assert.equal(out.logs[98], 'line\t99');
    assert.equal(out.logs[99], '[51 more log lines dropped: at most 100 lines per call]');
  });

  test('a line is cut to 1 KB (never inside a UTF-8 character), saying so', async () => {
    const out = await run('function f() log(string.rep("é", 3000)) log(string.rep("x", 1024)) end');
    const [cut, whole] = out.logs;
    assert.ok(cut !== undefined && whole !== undefined);
    assert.ok(Buffer.byteLength(cut) <= 1024, `${Buffer.byteLength(cut)} bytes`);
    assert.match(cut, /^(é)+ \[line cut: 6000 bytes, at most 1024 are kept\]$/);
    assert.equal(whole, 'x'.repeat(1024));
  });

  test('the lines written before an error are kept', async () => {
    const out = await run('function f() log("before") error("after") end');
    assert.deepEqual(out.logs, ['before']);
    assert.equal(out.error, 'script:1: after');
  });
});

describe('json', () => {
  test('decode then encode keeps the value', async () => {
    const value = {
      s: 'tab\t quote" backslash\\ slash/ é 😀 \u0001',
      n: [0, -1, 1.5, 1e300, 12345678901234, -0.25],
      b: [true, false],
      nested: { empty_object: {}, empty_array: [], list: [{ a: 1 }, [2, [3]]] },
      with_null: [1, null, 3],
    };
    const [text, roundTrip] = ok(await run('function f(s) local v = json.decode(s) return json.encode(v), v end', 'f', [JSON.stringify(value)]));
    assert.deepEqual(JSON.parse(text as string), value);
    assert.deepEqual(roundTrip, value);
  });

  test('escapes, surrogate pairs and nulls decode as documented', async () => {
    const out = ok(await run(
      'function f() local v = json.decode(\'{"a":"\\\\u00e9\\\\ud83d\\\\ude00\\\\n","b":null,"c":[null]}\') return v.a, v.b == nil, v.c[1] == json.null, #v.c end',
    ));
    assert.deepEqual(out, ['é😀\n', true, true, 1]);
  });

  test('malformed JSON is an error naming the position', async () => {
    for (const [text, message] of [
      ['[1,]', 'unexpected character at position 4'],
      ['{"a" 1}', "expected ':' at position 6"],
      ['01', 'number with a leading zero at position 1'],
      ['"open', 'unterminated string at the end of the text'],
      ['[1] x', 'unexpected text after the value at position 5'],
    ]) {
      const out = await run('function f(s) return json.decode(s) end', 'f', [text]);
      assert.equal(out.error, `json.decode: ${message}`, text);
    }
  });
});

describe('limits', () => {
  const plain = 'function f(n) return n + 1 end';

  /**
   * Runs `script`, which only the time limit can end, checking that the main event loop
   * ran a timer while the worker looped (the Lua runs off the main thread), then that the
   * engine still serves. `wall` is a lower bound only: the call may end late, never early.
   */
  async function runaway(script: string, on = timed) {
    let ticked = false;
    const tick = setTimeout(() => (ticked = true), 0);
    const started = performance.now();
    const out = await run(script, 'f', [], on);
    const wall = performance.now() - started;
    const tickedBeforeAnswer = ticked;
    clearTimeout(tick);
    assert.ok(tickedBeforeAnswer, 'the main event loop ran no timer while the script looped');
    await servesNext(on);
    return { out, wall };
  }

  /** Runs `script` on an engine whose time limit is out of the way, then checks that the engine still serves. */
  async function memoryHog(script: string) {
    const out = await run(script, 'f', [], engine);
    await servesNext(engine);
    return out;
  }

  async function servesNext(on: ScriptEngine) {
    assert.deepEqual(ok(await run(plain, 'f', [1], on)), [2], 'the engine serves the next call');
  }

  test('a busy loop ends at the time limit, inside the worker (no replacement)', async () => {
    const before = selfStopped.stats().replaced;
    const { out, wall } = await runaway('function f() while true do end end', selfStopped);
    assert.equal(out.error, 'script took longer than 1000 ms');
    assert.ok(wall >= TIME_LIMIT_MS - 5, `ended after ${wall} ms, before the limit`);
    assert.equal(selfStopped.stats().replaced, before);
  });

  test('a script cannot catch the time limit with pcall or xpcall', async () => {
    for (const script of [
      'function f() while true do pcall(function() while true do end end) end end',
      'function f() while true do xpcall(function() while true do end end, function() while true do end end) end end',
    ]) {
      assert.equal((await runaway(script, selfStopped)).out.error, 'script took longer than 1000 ms');
    }
  });

  test('a long C call (pathological string.find) is stopped by terminating the worker, which is replaced', async () => {
    const before = timed.stats().replaced;
    const { out } = await runaway('function f() return string.rep("a", 1e5):find(".-.-.-.-b") end');
    assert.equal(out.error, 'script took longer than 1000 ms');
    assert.equal(timed.stats().replaced, before + 1);
    assert.equal(timed.stats().workers, 1);
  });

  test('a huge string.rep hits the memory limit', async () => {
    const out = await memoryHog('function f() return string.rep("x", 1e9) end');
    assert.equal(out.error, 'script exceeded the 16 MB memory limit');
  });

  test('deep recursion ends with the memory limit', async () => {
    const out = await memoryHog('local function g() return 1 + g() end function f() return g() end');
    assert.match(out.error ?? '', /^script exceeded the 16 MB memory limit$|stack overflow/);
  });

  test('a table grown without end hits the memory limit, also when the script catches the error', async () => {
    assert.equal((await memoryHog('function f() local t = {} while true do t[#t + 1] = {} end end')).error, 'script exceeded the 16 MB memory limit');
    const caught = await run('function f() local ok, err = pcall(string.rep, "x", 64 * 1024 * 1024) return ok, err end', 'f', [], engine);
    assert.deepEqual(ok(caught), [false, 'not enough memory']);
  });

  test('the limit counts one call: the garbage of earlier calls does not', async () => {
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(ok(await run('function f() local t = {} for i = 1, 4 do t[i] = string.rep("x", 3 * 1024 * 1024) end return #t end', 'f', [], single)), [4]);
    }
  });

  test('a script and arguments of more than half the memory limit are refused before they reach Lua', async () => {
    const out = await run('function f(s) return #s end', 'f', ['x'.repeat(9 * 1024 * 1024)]);
    assert.match(out.error ?? '', /^script and arguments too large: \d+ bytes \(at most 8388608\)$/);
  });

  test('a runaway in one worker does not hold up calls on the other', async () => {
    const pair = createScriptEngine({ workers: 2, timeoutMs: TIME_LIMIT_MS, queueWaitMs: ROOMY });
    try {
      await eventually(() => pair.stats().ready >= 2, ROOMY, 5);
      const answered: string[] = [];
      const slow = run('function f() while true do end end', 'f', [], pair).then((o) => (answered.push('slow'), o));
      const quick = await Promise.all(Array.from({ length: 20 }, (_, i) => run(plain, 'f', [i], pair).then((o) => (answered.push('quick'), o))));
      quick.forEach((o, i) => assert.deepEqual(ok(o), [i + 1]));
      assert.equal((await slow).error, 'script took longer than 1000 ms');
      assert.deepEqual(answered, [...Array(20).fill('quick'), 'slow'], 'the quick calls were answered while the runaway ran');
    } finally {
      await pair.close();
    }
  });

  test('the limits are options', async () => {
    // Each limit is tested where the other one cannot fire first.
    const quick = createScriptEngine({ workers: 1, timeoutMs: 30, queueWaitMs: ROOMY });
    const small = createScriptEngine({ workers: 1, timeoutMs: ROOMY, queueWaitMs: ROOMY, memoryBytes: 1024 * 1024 });
    try {
      assert.equal((await run('function f() while true do end end', 'f', [], quick)).error, 'script took longer than 30 ms');
      assert.equal((await run('function f() return string.rep("x", 2 * 1024 * 1024) end', 'f', [], small)).error, 'script exceeded the 1 MB memory limit');
      assert.deepEqual(ok(await run('function f() return #string.rep("x", 256 * 1024) end', 'f', [], small)), [256 * 1024]);
    } finally {
      await Promise.all([quick.close(), small.close()]);
    }
  });
});

test('calls wait a bounded time, in a bounded queue', async () => {
  // The busy call's time limit is far beyond the queue wait, so the waiting call surely
  // gives up before a worker frees up, however slowly this machine runs.
  const e = createScriptEngine({ workers: 1, maxQueued: 1, queueWaitMs: 50, timeoutMs: 2_000 });
  try {
    await eventually(() => e.stats().ready >= 1, ROOMY, 5);
    const busy = e.run({ script: 'function f() while true do end end', hook: 'f', args: [] });
    assert.equal(e.stats().busy, 1);
    const waiting = e.run({ script: 'function f() return 1 end', hook: 'f', args: [] });
    const refused = await e.run({ script: 'function f() return 1 end', hook: 'f', args: [] });
    assert.equal(refused.error, 'script engine busy: 1 calls already waiting');
    assert.equal((await waiting).error, 'script engine busy: no worker free within 50 ms');
    assert.equal((await busy).error, 'script took longer than 2000 ms');
  } finally {
    await e.close();
  }
});

test('a call waits for the first worker to start, not for the queue wait, which bounds waiting behind busy workers', async () => {
  // A 1 ms queue wait is shorter than any worker's start: the first call waits for the start.
  const e = createScriptEngine({ workers: 1, queueWaitMs: 1, timeoutMs: ROOMY });
  try {
    assert.deepEqual(ok(await e.run({ script: 'function f() return 1 end', hook: 'f', args: [] })), [1]);
  } finally {
    await e.close();
  }
});

test('observe hears of every call: its hook, its result and its time in a worker', async () => {
  const seen: ScriptCallObservation[] = [];
  // maxQueued 1: with one call running and one waiting, the next is refused at once. The
  // time limit (1 s) is well away from what the other calls take, and the queue wait well
  // beyond the time limit, so each call ends the one way it is meant to.
  const e = createScriptEngine({ workers: 1, memoryBytes: 1024 * 1024, timeoutMs: TIME_LIMIT_MS, queueWaitMs: 60_000, maxQueued: 1, observe: (c) => seen.push(c) });
  const ready = () => eventually(() => e.stats().ready >= 1, ROOMY, 5);
  const call = async (hook: string, body: string) => e.run({ script: `function ${hook}() ${body} end`, hook, args: [] });
  try {
    for (const [hook, body] of [['on_response', 'return 1'], ['verify', 'error("no")'], ['filter', 'while true do end'], ['transform', 'return string.rep("x", 2 * 1024 * 1024)']]) {
      await ready();
      await call(hook!, body!);
    }
    await ready();
    assert.match((await e.check('x = ', ['verify'])) ?? '', /script:/);
    await ready();
    const busy = call('route', 'while true do end');
    const waiting = call('route', 'return {}');
    assert.equal((await call('route', 'return {}')).unavailable, true);
    await Promise.all([busy, waiting]);
  } finally {
    await e.close();
  }
  assert.deepEqual(seen.map(({ hook, result }) => [hook, result]), [
    ['on_response', 'ok'], ['verify', 'error'], ['filter', 'timeout'], ['transform', 'memory'], ['check', 'error'],
    ['route', 'unavailable'], ['route', 'timeout'], ['route', 'ok'],
  ]);
  // The runaway loop ran until the time limit stopped it (never earlier); the refused call never ran.
  assert.ok(seen[2]!.seconds >= TIME_LIMIT_MS / 1000, `${seen[2]!.seconds}`);
  assert.equal(seen[5]!.seconds, 0);
});

test('a closed engine refuses calls', async () => {
  const e = createScriptEngine({ workers: 1, timeoutMs: ROOMY, queueWaitMs: ROOMY });
  assert.deepEqual(ok(await e.run({ script: 'function f() return 1 end', hook: 'f', args: [] })), [1]);
  await e.close();
  await assert.rejects(e.run({ script: 'function f() return 1 end', hook: 'f', args: [] }), /closed/);
});

function luaList(items: string[]): string {
  return `{${items.map((s) => JSON.stringify(s)).join(', ')}}`;
}
