-- CascadeKV's Lua prelude: runs once per Lua state, with the full globals, before
-- the sandbox closes them. Arguments: the Rust helpers. Returns the handles the
-- engine keeps (see engine.rs). Nothing here is reachable by name from scripts
-- except through the `redis` table and the overridden pcall/xpcall.
local H = ...
local G = _G
local opcall, oxpcall, unpack, select, type, tostring, error, setmetatable, rawget, rawset =
  pcall, xpcall, unpack, select, type, tostring, error, setmetatable, rawget, rawset
local sub, match, gsub = string.sub, string.match, string.gsub

-- The command runner of the script now running (bound by the engine per run).
local raw = nil
local function bind(f) raw = f end

-- An error raised by a library written in Rust (a userdata) as the string Redis's C
-- libraries raise: its first line, without mlua's prefix. Other values unchanged.
local function plain(err)
  if type(err) ~= 'userdata' then return err end
  local s = tostring(err)
  s = match(s, '^[^\n]*') or s
  return (gsub(s, '^runtime error: ', ''))
end

-- Redis's error handler: an error becomes {err=..., source=..., line=...}, with the
-- position of the innermost frame of user code.
local function handler(err)
  local src, line = H.where()
  if type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(plain(err))}
  end
  if src then
    err['source'] = src
    err['line'] = line
  end
  return err
end

local function pack(...) return {n = select('#', ...), ...} end

-- Runs f(...) under the handler: true, result or false, error table.
local function run(f, ...)
  local args = pack(...)
  return oxpcall(function() return f(unpack(args, 1, args.n)) end, handler)
end

local KILLED = {err = 'ERR Script killed by user with SCRIPT KILL...'}
local killed = H.killed
-- pcall/xpcall cannot catch a SCRIPT KILL: once killed, the error goes on.
-- A caught library error is a string, as with Redis's C libraries.
G.pcall = function(...)
  local r = pack(opcall(...))
  if killed() then error(KILLED) end
  if not r[1] then r[2] = plain(r[2]) end
  return unpack(r, 1, r.n)
end
G.xpcall = function(f, h)
  local r = pack(oxpcall(f, function(e) return h(plain(e)) end))
  if killed() then error(KILLED) end
  return unpack(r, 1, r.n)
end

local function no_run()
  error({err = 'ERR redis.call/pcall can only be called inside a script invocation'})
end

local redis = {}
-- Arguments travel as one table: a call with thousands of them (unpack) does not
-- grow the C stack of the runner.
redis.call = function(...)
  if raw == nil then no_run() end
  local ok, r = raw(select('#', ...), {...})
  if not ok then error(r) end
  return r
end
redis.pcall = function(...)
  if raw == nil then no_run() end
  local _, r = raw(select('#', ...), {...})
  return r
end
redis.sha1hex = H.sha1hex
redis.error_reply = function(...)
  local e = ...
  if select('#', ...) ~= 1 or type(e) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  if sub(e, 1, 1) ~= '-' then e = '-' .. e end
  return {err = H.errtext(e)}
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = s}
end
redis.log = H.log
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.setresp = H.setresp
redis.set_repl = H.set_repl
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = H.acl_check_cmd
redis.REDIS_VERSION = H.version
redis.REDIS_VERSION_NUM = H.version_num

-- A read-only view of a table: reads see it, writes fail as Redis's readonly tables.
local protected = setmetatable({}, {__mode = 'k'})
local function ro_fail() error('Attempt to modify a readonly table', 3) end
-- What getmetatable shows of a protected table: itself read-only.
local shown_mt = setmetatable({}, {__newindex = function() error('Attempt to modify a readonly table', 2) end})
local function readonly(t)
  local p = setmetatable({}, {
    __index = t,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = shown_mt,
  })
  protected[p] = true
  return p
end
local osetmetatable = setmetatable
G.setmetatable = function(t, mt)
  if protected[t] then ro_fail() end
  return osetmetatable(t, mt)
end

G.redis = readonly(redis)
for _, lib in ipairs({'string', 'table', 'math', 'cjson', 'bit', 'struct', 'cmsgpack'}) do
  if rawget(G, lib) then rawset(G, lib, readonly(rawget(G, lib))) end
end
G.dofile, G.loadfile = nil, nil
G.print, G.os, G.io, G.package, G.require, G.module, G.newproxy, G.gcinfo = nil, nil, nil, nil, nil, nil, nil
-- Scripts reach the debug library only through the names Redis keeps.
G.debug = nil

-- The globals scripts see: reads of undeclared names fail, writes fail.
-- `holder.base` is where reads go (the real globals, or during FUNCTION LOAD a
-- table with `redis` only).
local function sandbox(holder)
  local env = {}
  setmetatable(env, {
    __index = function(_, k)
      if k == '_G' then return env end
      local v = holder.base[k]
      if v == nil then
        error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
      end
      return v
    end,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = shown_mt,
  })
  protected[env] = true
  return env
end

local eval_env = sandbox({base = G})

local holders = setmetatable({}, {__mode = 'k'})
-- The environment of a function library while FUNCTION LOAD runs its code: only
-- `redis`, offering register_function, log and the constants.
local function load_env(register)
  local api = {
    register_function = register,
    log = H.log,
    LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
    REDIS_VERSION = H.version, REDIS_VERSION_NUM = H.version_num,
  }
  local holder = {base = {redis = sandbox({base = api})}}
  local env = sandbox(holder)
  holders[env] = holder
  return env
end

-- After loading, the library's functions see every global and the full API.
local function finish_env(env)
  local h = holders[env]
  if h then h.base = G end
end

-- Binary chunks are refused; text chunks run in the scripts' sandbox.
local oloadstring, setfenv = loadstring, setfenv
G.loadstring = function(s, name)
  if type(s) == 'string' and sub(s, 1, 1) == '\27' then return nil, 'binary chunks are not allowed' end
  local f, e = oloadstring(s, name)
  if f then setfenv(f, eval_env) end
  return f, e
end
G.load = nil

return bind, run, eval_env, load_env, finish_env
