/**
 * The trusted Lua prelude. It runs once per Lua state, with the full standard library,
 * keeps in locals the few functions it needs itself (`load`, `debug.sethook`,
 * `os.clock`, `collectgarbage`), empties the global table and returns `init`.
 *
 * `init(config_json)` returns `entry(kind, script, hook, payload_json)`, which runs one
 * call: a new environment table holding only the sandbox's functions, the script loaded
 * into it as text (`load(script, "=script", "t", env)`), its top level run, then (for
 * "run") the hook called with the decoded arguments. It always returns one JSON text:
 *   run:   {"result":[...],"logs":[...]} | {"missing":true,"logs":[...]} | {"error":"...","logs":[...]}
 *   check: {} | {"error":"..."}
 * Only strings cross between JavaScript and Lua, in both directions: no JS object or
 * function is ever pushed into the state, so scripts cannot reach one.
 *
 * Why each piece:
 * - A new environment per call (not a new state): a script's globals live in its own
 *   table, which nothing keeps after the call. Library tables are copied into it, so
 *   `string.x = 1` does not outlive the call either; the real `string` table (the one
 *   the string metatable's `__index` holds, reachable as `("").upper`) loses `dump`,
 *   and `getmetatable` answers only for tables.
 * - `math.random` is reseeded per call: its state is the one thing the libraries keep.
 * - `setmetatable` refuses `__gc`: a finalizer would run during a later call.
 * - The time limit is an instruction-count hook set on the call's thread; its error
 *   is a private table that the sandbox's `pcall`/`xpcall` pass on, so a script cannot
 *   catch it and carry on. `coroutine` is left out: a new coroutine runs without that
 *   hook and `coroutine.resume` would catch the limit error; the hooks need neither.
 * - The memory limit is the Lua allocator's (set from JavaScript); Lua reports it as
 *   "not enough memory", which this maps to the limit message. A script may catch it
 *   with `pcall`: it still cannot go over the limit.
 * - JSON is done here, in Lua, with raw table access only (no metamethod of a script
 *   runs inside the encoder).
 */
export const SANDBOX_PRELUDE = String.raw`
local load, pcall, xpcall, error, type, select, next, pairs, ipairs = load, pcall, xpcall, error, type, select, next, pairs, ipairs
local tostring, tonumber, rawget, rawset, rawequal, rawlen = tostring, tonumber, rawget, rawset, rawequal, rawlen
local setmetatable, getmetatable, assert = setmetatable, getmetatable, assert
local string, table, math, utf8 = string, table, math, utf8
local sethook, clock, collect = debug.sethook, os.clock, collectgarbage
local byte, find, sub, format, gsub, match = string.byte, string.find, string.sub, string.format, string.gsub, string.match
local concat, unpack, pack = table.concat, table.unpack, table.pack
local mathtype, huge, randomseed = math.type, math.huge, math.randomseed
local utf8char, utf8len = utf8.char, utf8.len
local VERSION = _VERSION
-- The worker's digest function (see worker.ts): kept here, wrapped below, never in a script's reach.
local native_digest = __jetcron_digest

-- The real string table stays reachable through the string metatable ("x"):rep(...).
string.dump = nil
getmetatable("").__metatable = false

-- Scripts never see this table (they get their own); empty it all the same.
local G = _G
for k in next, G do G[k] = nil end

-- The time limit's error value, new for each call: a script can see it in a __close
-- handler while the error passes, and must not be able to leave anything in it.
local TIME_LIMIT
local LIMITS
local MEMORY_ERROR = "not enough memory"

----------------------------------------------------------------------------- json
local NULL_MT = { __tostring = function() return "null" end, __metatable = false }
local NULL                                     -- json.null of the current call
local arrays = setmetatable({}, { __mode = "k" }) -- tables json.decode made from a JSON array

local function fail(msg) error({ json_error = msg }, 0) end

-- The encoder appends to one buffer (it never runs a script's code, so it is never re-entered).
local buf, nb, values, max_values = {}, 0, 0, huge

local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
local function escape_char(c) return escapes[c] or format('\\u%04x', byte(c)) end
local function quote(s)
  if find(s, '[%c"\\]') then s = gsub(s, '[%c"\\]', escape_char) end
  return '"' .. s .. '"'
end
local function put_string(s)
  if find(s, '[%c"\\]') then s = gsub(s, '[%c"\\]', escape_char) end
  buf[nb + 1], buf[nb + 2], buf[nb + 3] = '"', s, '"'
  nb = nb + 3
end

local function number_text(n)
  if mathtype(n) == "integer" then return format("%d", n) end
  if n ~= n or n == huge or n == -huge then fail("cannot encode " .. tostring(n) .. " (JSON has no such number)") end
  local s = format("%.14g", n)
  if tonumber(s) ~= n then s = format("%.17g", n) end
  return s
end

local put_value
local function put_table(t, depth, seen)
  if seen[t] then fail("cannot encode a table that contains itself") end
  if depth > LIMITS.json_depth then fail("cannot encode tables nested deeper than " .. LIMITS.json_depth .. " levels") end
  seen[t] = true
  local n, count, sequence = rawlen(t), 0, true
  for k in next, t do
    count = count + 1
    if sequence and (mathtype(k) ~= "integer" or k < 1 or k > n) then sequence = false end
  end
  if count == 0 then
    nb = nb + 1; buf[nb] = arrays[t] and "[]" or "{}"
  elseif sequence and count == n then
    nb = nb + 1; buf[nb] = "["
    for i = 1, n do
      if i > 1 then nb = nb + 1; buf[nb] = "," end
      put_value(rawget(t, i), depth + 1, seen)
    end
    nb = nb + 1; buf[nb] = "]"
  else
    local sep = "{"
    for k, v in next, t do
      local kt = type(k)
      if kt == "number" then k = number_text(k)
      elseif kt ~= "string" then fail("cannot encode a table key of type " .. kt) end
      nb = nb + 1; buf[nb] = sep
      put_string(k)
      nb = nb + 1; buf[nb] = ":"
      sep = ","
      put_value(v, depth + 1, seen)
    end
    nb = nb + 1; buf[nb] = "}"
  end
  seen[t] = nil
end

put_value = function(v, depth, seen)
  values = values + 1
  if values > max_values then fail("holds more than " .. max_values .. " values") end
  local t = type(v)
  if t == "string" then put_string(v)
  elseif t == "number" then nb = nb + 1; buf[nb] = number_text(v)
  elseif t == "boolean" then nb = nb + 1; buf[nb] = v and "true" or "false"
  elseif t == "nil" or rawequal(v, NULL) then nb = nb + 1; buf[nb] = "null"
  elseif t == "table" then put_table(v, depth, seen)
  else fail("cannot encode a " .. t .. " (JSON has no such value)") end
end

-- limit: at most this many JSON values (the hook's results; json.encode has none).
local function encode(v, limit)
  buf, nb, values, max_values = {}, 0, 0, limit or huge
  put_value(v, 0, {})
  local s = concat(buf, "", 1, nb)
  buf = {}
  return s
end

local function skip(s, i)
  local _, e = find(s, "^[ \t\r\n]*", i)
  return e + 1
end

local function bad(s, i, what)
  if i > #s then fail(what .. " at the end of the text") end
  fail(format("%s at position %d", what, i))
end

local escape_values = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }
local function decode_string(s, i)
  local plain, after = match(s, '^"([^\0-\31"\\]*)"()', i)
  if plain then return plain, after end
  local j, parts, n = i + 1, {}, 0
  while true do
    local k = find(s, '[\0-\31"\\]', j)
    if not k then bad(s, #s + 1, "unterminated string") end
    local c = byte(s, k)
    n = n + 1; parts[n] = sub(s, j, k - 1)
    if c == 34 then
      return concat(parts, "", 1, n), k + 1
    elseif c == 92 then
      local e = sub(s, k + 1, k + 1)
      if e == "u" then
        local hex = match(s, "^%x%x%x%x", k + 2)
        if not hex then bad(s, k, "bad \\u escape") end
        local cp, after = tonumber(hex, 16), k + 6
        if cp >= 0xD800 and cp <= 0xDBFF then
          local low = match(s, "^\\u(%x%x%x%x)", after)
          local lcp = low and tonumber(low, 16)
          if lcp and lcp >= 0xDC00 and lcp <= 0xDFFF then
            cp, after = 0x10000 + (cp - 0xD800) * 0x400 + (lcp - 0xDC00), after + 6
          else
            cp = 0xFFFD -- a lone surrogate has no UTF-8 form
          end
        elseif cp >= 0xDC00 and cp <= 0xDFFF then
          cp = 0xFFFD
        end
        n = n + 1; parts[n] = utf8char(cp)
        j = after
      else
        local v = escape_values[e]
        if not v then bad(s, k, "bad escape") end
        n = n + 1; parts[n] = v
        j = k + 2
      end
    else
      bad(s, k, "control character in string")
    end
  end
end

local function decode_number(s, i)
  local text = match(s, "^-?%d+%.?%d*[eE]?[-+]?%d*", i)
  local n = text and tonumber(text)
  if not n then bad(s, i, "unexpected character") end
  -- tonumber takes a little more than JSON does: "01", "1.", "1.e5".
  local lead = byte(text, 1) == 45 and 2 or 1
  local second = byte(text, lead + 1)
  if byte(text, lead) == 48 and second and second >= 48 and second <= 57 then bad(s, i, "number with a leading zero") end
  if mathtype(n) == "float" and find(text, "%.%f[%D]") then bad(s, i, "number without digits after '.'") end
  return n, i + #text
end

local decode_value
local function decode_array(s, i, depth)
  local t, n = {}, 0
  arrays[t] = true
  i = i + 1
  local c = byte(s, i)
  if c and c <= 32 then i = skip(s, i); c = byte(s, i) end
  if c == 93 then return t, i + 1 end
  while true do
    local v
    v, i = decode_value(s, i, depth)
    n = n + 1
    if v == nil then v = NULL end
    t[n] = v
    c = byte(s, i)
    if c and c <= 32 then i = skip(s, i); c = byte(s, i) end
    if c == 93 then return t, i + 1 end
    if c ~= 44 then bad(s, i, "expected ',' or ']'") end
    i = i + 1
  end
end

local function decode_object(s, i, depth)
  local t = {}
  i = i + 1
  local c = byte(s, i)
  if c and c <= 32 then i = skip(s, i); c = byte(s, i) end
  if c == 125 then return t, i + 1 end
  while true do
    if c ~= 34 then bad(s, i, "expected a string key") end
    local k, v
    k, i = decode_string(s, i)
    c = byte(s, i)
    if c and c <= 32 then i = skip(s, i); c = byte(s, i) end
    if c ~= 58 then bad(s, i, "expected ':'") end
    v, i = decode_value(s, i + 1, depth)
    t[k] = v
    c = byte(s, i)
    if c and c <= 32 then i = skip(s, i); c = byte(s, i) end
    if c == 125 then return t, i + 1 end
    if c ~= 44 then bad(s, i, "expected ',' or '}'") end
    i = i + 1
    c = byte(s, i)
    if c and c <= 32 then i = skip(s, i); c = byte(s, i) end
  end
end

decode_value = function(s, i, depth)
  local c = byte(s, i)
  if c and c <= 32 then i = skip(s, i); c = byte(s, i) end
  if c == 34 then return decode_string(s, i) end
  if c == 123 or c == 91 then
    if depth >= LIMITS.json_depth then bad(s, i, "nested deeper than " .. LIMITS.json_depth .. " levels") end
    if c == 123 then return decode_object(s, i, depth + 1) end
    return decode_array(s, i, depth + 1)
  end
  if c == 116 and sub(s, i, i + 3) == "true" then return true, i + 4 end
  if c == 102 and sub(s, i, i + 4) == "false" then return false, i + 5 end
  if c == 110 and sub(s, i, i + 3) == "null" then return nil, i + 4 end
  return decode_number(s, i)
end

local function decode(s)
  local v, i = decode_value(s, 1, 0)
  i = skip(s, i)
  if i <= #s then bad(s, i, "unexpected text after the value") end
  return v
end

-- The json functions as scripts see them: a JSON error is blamed on the caller's line;
-- a limit error passes through untouched.
local function rethrow(name, e)
  if type(e) == "table" and type(rawget(e, "json_error")) == "string" then error(name .. ": " .. rawget(e, "json_error"), 3) end
  error(e, 0)
end
local function json_encode(v)
  local ok, s = pcall(encode, v)
  if not ok then rethrow("json.encode", s) end
  return s
end
local function json_decode(s)
  if type(s) ~= "string" then error("json.decode: expects a string, got " .. type(s), 2) end
  local ok, v = pcall(decode, s)
  if not ok then rethrow("json.decode", v) end
  return v
end

----------------------------------------------------------------------------- logs
local logs, log_count

local function cut(s, max, what)
  local marker = format(" [%s cut: %d bytes, at most %d are kept]", what, #s, max)
  local keep = max - #marker
  -- Do not end inside a UTF-8 sequence.
  while keep > 0 do
    local b = byte(s, keep + 1)
    if not b or b < 0x80 or b >= 0xC0 then break end
    keep = keep - 1
  end
  return sub(s, 1, keep) .. marker
end

local function log(...)
  log_count = log_count + 1
  if log_count > LIMITS.log_lines then return end
  local n, line = select("#", ...), nil
  if n == 1 then
    line = tostring((...))
  else
    local parts = {}
    for i = 1, n do parts[i] = tostring((select(i, ...))) end
    line = concat(parts, "\t")
  end
  if #line > LIMITS.log_line_bytes then line = cut(line, LIMITS.log_line_bytes, "line") end
  logs[log_count] = line
end

local function logs_text()
  if log_count > LIMITS.log_lines then
    logs[LIMITS.log_lines] = format("[%d more log lines dropped: at most %d lines per call]",
      log_count - LIMITS.log_lines + 1, LIMITS.log_lines)
  end
  return encode(logs)
end

----------------------------------------------------------------------------- sandbox
local function pass_limit(ok, ...)
  if not ok and rawequal((...), TIME_LIMIT) then error(TIME_LIMIT, 0) end
  return ok, ...
end
local function sandbox_pcall(f, ...)
  return pass_limit(pcall(f, ...))
end
local function sandbox_xpcall(f, handler, ...)
  return pass_limit(xpcall(f, function(e)
    if rawequal(e, TIME_LIMIT) then return e end
    return handler(e)
  end, ...))
end
local function sandbox_getmetatable(v)
  if type(v) ~= "table" then return nil end
  return getmetatable(v)
end
local function sandbox_setmetatable(t, mt)
  if type(t) ~= "table" then error("bad argument #1 to 'setmetatable' (table expected, got " .. type(t) .. ")", 2) end
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then error("__gc metamethods are not available", 2) end
  return setmetatable(t, mt)
end

local function copy(t)
  local c = {}
  for k, v in next, t do c[k] = v end
  return c
end

----------------------------------------------------------------------------- crypto
-- Signature checks at native speed: SHA-256 of a 1 KB body written in Lua costs about
-- 0.8 ms here, the whole budget of an inbound request. Only strings go in and out;
-- the arguments are checked here so the native side sees UTF-8 text without NULs
-- (what it turns into JavaScript strings unchanged).
local function text_arg(fname, i, v)
  if type(v) ~= "string" then error(format("crypto.%s: argument %d must be a string, not %s", fname, i, type(v)), 3) end
  if find(v, "\0", 1, true) or not utf8len(v) then error(format("crypto.%s: argument %d must be UTF-8 text without NUL bytes", fname, i), 3) end
end
local function encoding_arg(fname, i, enc)
  if enc == nil then return "hex" end
  if enc ~= "hex" and enc ~= "base64" then error(format('crypto.%s: argument %d must be "hex" or "base64"', fname, i), 3) end
  return enc
end
local function hmac(algorithm, fname)
  return function(key, message, enc)
    text_arg(fname, 1, key)
    text_arg(fname, 2, message)
    return native_digest(algorithm, key, message, encoding_arg(fname, 3, enc))
  end
end
local crypto_lib = {
  hmac_sha256 = hmac("hmac-sha256", "hmac_sha256"),
  hmac_sha1 = hmac("hmac-sha1", "hmac_sha1"),
  sha256 = function(message, enc)
    text_arg("sha256", 1, message)
    return native_digest("sha256", "", message, encoding_arg("sha256", 2, enc))
  end,
  -- Compares without stopping at the first difference: the time says nothing about where they differ.
  equal = function(a, b)
    if type(a) ~= "string" or type(b) ~= "string" or #a ~= #b then return false end
    local diff = 0
    for i = 1, #a do diff = diff | (byte(a, i) ~ byte(b, i)) end
    return diff == 0
  end,
}

local function new_env()
  local env = {
    assert = assert, error = error, ipairs = ipairs, next = next, pairs = pairs,
    pcall = sandbox_pcall, xpcall = sandbox_xpcall, rawequal = rawequal, rawget = rawget,
    rawlen = rawlen, rawset = rawset, select = select, type = type, tonumber = tonumber,
    tostring = tostring, unpack = unpack, getmetatable = sandbox_getmetatable,
    setmetatable = sandbox_setmetatable, _VERSION = VERSION,
    string = copy(string), table = copy(table), math = copy(math), utf8 = copy(utf8),
    json = { encode = json_encode, decode = json_decode, null = NULL },
    crypto = copy(crypto_lib),
    log = log, print = log,
  }
  env._G = env
  return env
end

----------------------------------------------------------------------------- calls
local deadline = 0
local function watchdog()
  if clock() > deadline then error(TIME_LIMIT, 0) end
end

local function message_of(e)
  if rawequal(e, TIME_LIMIT) then return LIMITS.time_message end
  if rawequal(e, MEMORY_ERROR) then return LIMITS.memory_message end
  local t = type(e)
  if t == "table" and type(rawget(e, "json_error")) == "string" then e = rawget(e, "json_error"); t = "string" end
  if t == "number" then return tostring(e) end
  if t ~= "string" then return "(error object is a " .. t .. " value)" end
  -- A position inside this prelude (a sandbox function called in a tail call) says nothing to the script's author.
  e = gsub(e, "^sandbox:%d+: ", "")
  if #e > LIMITS.error_bytes then return cut(e, LIMITS.error_bytes, "message") end
  return e
end

-- The hook's arguments: a JSON array whose nulls are nils.
local function decode_args(payload)
  local list = decode(payload)
  local args, n = {}, #list
  for i = 1, n do
    local v = list[i]
    if not rawequal(v, NULL) then args[i] = v end
  end
  return args, n
end

local function load_script(script)
  local env = new_env()
  local chunk, err = load(script, "=script", "t", env)
  if not chunk then return nil, err end
  chunk()
  return env
end

local function run(script, hook, payload)
  local args, n = decode_args(payload)
  local env, err = load_script(script)
  if not env then error(err, 0) end
  local fn = rawget(env, hook)
  if fn == nil then return '{"missing":true,"logs":' .. logs_text() .. '}' end
  if type(fn) ~= "function" then error(hook .. " is a " .. type(fn) .. ", not a function", 0) end
  local results = pack(fn(unpack(args, 1, n)))
  for i = 1, results.n do
    if results[i] == nil then results[i] = NULL end
  end
  results.n = nil
  arrays[results] = true
  local ok, text = pcall(encode, results, LIMITS.result_values)
  if not ok then
    if type(text) == "table" and type(rawget(text, "json_error")) == "string" then
      error(format("%s returned what JSON cannot hold: %s", hook, rawget(text, "json_error")), 0)
    end
    error(text, 0)
  end
  if #text > LIMITS.result_bytes then
    error(format("%s returned %d bytes of JSON, more than the %d allowed", hook, #text, LIMITS.result_bytes), 0)
  end
  return '{"result":' .. text .. ',"logs":' .. logs_text() .. '}'
end

local function check(script, _, payload)
  local hooks = decode(payload)
  local env, err = load_script(script)
  if not env then return '{"error":' .. quote(message_of(err)) .. '}' end
  local found = false
  for _, name in ipairs(hooks) do
    local fn = rawget(env, name)
    if fn ~= nil then
      if type(fn) ~= "function" then return '{"error":' .. quote(name .. " is a " .. type(fn) .. ", not a function") .. '}' end
      found = true
    end
  end
  if not found then return '{"error":' .. quote("defines none of " .. concat(hooks, ", ")) .. '}' end
  return '{}'
end

local function error_text(e)
  return '{"error":' .. quote(message_of(e)) .. ',"logs":' .. logs_text() .. '}'
end

local function entry(kind, script, hook, payload)
  logs, log_count = {}, 0
  arrays[logs] = true
  NULL = setmetatable({}, NULL_MT)
  TIME_LIMIT = {}
  randomseed()
  deadline = clock() + LIMITS.timeout_ms / 1000
  sethook(watchdog, "", LIMITS.hook_every)
  local ok, out = pcall(kind == "check" and check or run, script, hook, payload)
  sethook()
  if ok then return out end
  ok, out = pcall(error_text, out)
  if ok then return out end
  return '{"error":' .. quote(message_of(out)) .. ',"logs":[]}'
end

return function(config)
  LIMITS = { json_depth = 4 }
  local ok, limits = pcall(decode, config)
  if not ok then
    error("the sandbox configuration is not JSON: " .. tostring(type(limits) == "table" and rawget(limits, "json_error") or limits), 0)
  end
  LIMITS = limits
  collect("collect")
  return entry
end
`;
