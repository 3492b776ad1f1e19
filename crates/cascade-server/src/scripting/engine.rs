//! The script thread: the Lua state, Redis's sandbox, the script cache, EVAL*, SCRIPT
//! and the run of one script (gate, hook, transaction, reply).
//!
//! The Lua state is created once (and again on `SCRIPT FLUSH`, as Redis resets its
//! interpreter): the standard libraries Redis loads (base, table, string, math; not
//! debug, which `mlua` keeps to its unsafe constructor), Redis's libraries (`libs/`), then `prelude.lua`, which builds
//! the `redis` table, makes library tables read-only and returns the sandboxed global
//! environment scripts run in (undeclared reads and every write fail as in Redis).
//!
//! A run ([`Engine::run`]) holds the gate exclusively, installs an instruction hook
//! that stops the script once `SCRIPT KILL` asked (and only reports it: the busy
//! state itself is read by workers from the gate's clock), binds `redis.call` to a
//! runner over a fresh [`Tx`] for this run (a scoped function: it cannot outlive the
//! run), calls the script under Redis's error handler, converts the result, and
//! commits the transaction as one engine batch — also when the script failed after
//! writing, as Redis keeps the writes of a failed script.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Weak};

use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use super::api::{self, RunCtx};
use super::functions::Libraries;
use super::{convert, Job};
use crate::cmd::{is, parse_i64, Client, Commands};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::shared::Shared;
use crate::store::Tx;

/// `-NOSCRIPT`.
pub(crate) const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// Instructions between two looks at the kill flag.
const HOOK_EVERY: u32 = 100_000;

/// The Lua state and what lives in it.
pub(crate) struct Lvm {
    pub(crate) lua: Lua,
    /// Binds the runner `redis.call` uses (nil between runs).
    pub(crate) bind: Function,
    /// `run(f, ...)`: calls under the error handler.
    pub(crate) run: Function,
    /// The sandboxed globals of EVAL scripts.
    pub(crate) eval_env: Table,
    /// Builds a library's load-time environment.
    pub(crate) load_env: Function,
    /// Gives a loaded library's environment the full API.
    pub(crate) finish_env: Function,
    /// The script's RESP version is 3.
    pub(crate) resp3: Rc<Cell<bool>>,
}

impl Lvm {
    /// A fresh interpreter with Redis's libraries, API and sandbox.
    pub(crate) fn new(shared: &Arc<Shared>) -> mlua::Result<Lvm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        super::libs::install(&lua)?;
        let resp3 = Rc::new(Cell::new(false));
        let helpers = api::helpers(&lua, shared, &resp3)?;
        let (bind, run, eval_env, load_env, finish_env): (
            Function,
            Function,
            Table,
            Function,
            Function,
        ) = lua
            .load(include_str!("prelude.lua"))
            .set_name("=prelude")
            .call(helpers)?;
        Ok(Lvm {
            lua,
            bind,
            run,
            eval_env,
            load_env,
            finish_env,
            resp3,
        })
    }
}

/// Flags of a script or function (shebang / `register_function`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    /// `no-writes`.
    pub(crate) no_writes: bool,
    /// Declared with a shebang (or a function): flags apply.
    pub(crate) declared: bool,
}

/// Parses script flags (`no-writes`, `allow-oom`, ...); `None` for an unknown flag.
pub(crate) fn parse_flag(f: &str, flags: &mut Flags) -> bool {
    match f {
        "no-writes" => flags.no_writes = true,
        "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
        _ => return false,
    }
    true
}

/// A cached EVAL script.
struct Script {
    func: Function,
    flags: Flags,
}

/// Everything the script thread owns.
pub(crate) struct Engine {
    pub(crate) vm: Lvm,
    scripts: HashMap<String, Script>,
    pub(crate) libs: Libraries,
    pub(crate) commands: Commands,
    /// The command being handled (FUNCTION STATS shows it).
    current: Vec<Vec<u8>>,
    /// The database the calling client selected (scripts run in it).
    db: usize,
    /// The calling client (see [`Job::caller`](super::Job)).
    caller: u64,
    /// The caller remembers the keys it reads (see [`Job::remember`](super::Job)).
    remember: bool,
}

/// What one run is.
pub(crate) struct RunSpec<'a> {
    /// The Lua function.
    pub(crate) func: &'a Function,
    /// Its name in error messages (`f_<sha>` or the function name).
    pub(crate) name: &'a str,
    /// FCALL (KEYS and ARGV are arguments) rather than EVAL (globals).
    pub(crate) function: bool,
    /// Writes refused.
    pub(crate) read_only: bool,
}

/// The script thread's loop.
pub(crate) fn thread_main(weak: &Weak<Shared>, rx: &Receiver<Job>) {
    let Some(shared) = weak.upgrade() else {
        return;
    };
    if shared.fixed.sync {
        cascadekv::set_thread_log_slot(0);
    }
    let mut engine = match Engine::new(&shared) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cascade: the Lua interpreter could not start: {e}");
            return;
        }
    };
    if let Err(e) = engine.load_stored(&shared) {
        eprintln!("cascade: stored functions could not be loaded: {e}");
    }
    *shared.scripts.counts.lock() = engine.counts();
    drop(shared);
    while let Ok(job) = rx.recv() {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let mut out = Out {
            buf: Vec::new(),
            resp3: job.resp3,
        };
        engine.db = job.db;
        engine.caller = job.caller;
        engine.remember = job.remember;
        engine.handle(&shared, &job.cmd, &mut out);
        if shared.config.sync.load(Ordering::Relaxed) {
            if let Err(e) = shared.store.db().sync_thread() {
                out.buf.clear();
                reply::error(&mut out, &format!("ERR storage error: {e}"));
            }
        }
        job.slot.fill(out.buf);
    }
}

impl Engine {
    fn new(shared: &Arc<Shared>) -> mlua::Result<Engine> {
        Ok(Engine {
            vm: Lvm::new(shared)?,
            scripts: HashMap::new(),
            libs: Libraries::default(),
            commands: Commands::default(),
            current: Vec::new(),
            db: 0,
            caller: 0,
            remember: false,
        })
    }

    /// Runs one scripting command, writing its reply.
    fn handle(&mut self, shared: &Arc<Shared>, c: &Command, out: &mut Out) {
        let name = c.arg(0).to_ascii_lowercase();
        self.current = c.to_vecs();
        match name.as_slice() {
            b"eval" | b"eval_ro" | b"evalsha" | b"evalsha_ro" => self.eval(shared, c, out),
            b"script" => self.script(shared, c, out),
            b"fcall" | b"fcall_ro" => self.fcall(shared, c, out),
            b"function" => self.function(shared, c, out),
            _ => reply::error(out, "ERR unknown scripting command"),
        }
        *shared.scripts.counts.lock() = self.counts();
        *shared.scripts.cached.lock() = u64::try_from(self.scripts.len()).unwrap_or(u64::MAX);
    }

    /// Compiles an EVAL body (cached by SHA-1); returns the SHA.
    fn compile(&mut self, body: &[u8]) -> Result<String, String> {
        let sha = api::sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let mut flags = Flags::default();
        let mut code: &[u8] = body;
        let shebang_owned;
        if body.starts_with(b"#!") {
            let end = body
                .iter()
                .position(|&b| b == b'\n')
                .ok_or_else(|| "ERR Invalid script shebang".to_string())?;
            let line = String::from_utf8_lossy(&body[..end]).into_owned();
            let mut parts = line.split_ascii_whitespace();
            let engine = parts.next().unwrap_or("");
            if engine != "#!lua" {
                return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
            }
            flags.declared = true;
            for p in parts {
                if let Some(list) = p.strip_prefix("flags=") {
                    for f in list.split(',').filter(|f| !f.is_empty()) {
                        if !parse_flag(f, &mut flags) {
                            return Err(format!("ERR Unexpected flag in script shebang: {f}"));
                        }
                    }
                } else {
                    return Err(format!("ERR Unknown lua shebang option: {p}"));
                }
            }
            // The line feed stays: error line numbers match the user's.
            shebang_owned = body[end..].to_vec();
            code = &shebang_owned;
        } else {
            shebang_owned = Vec::new();
        }
        let func = self
            .vm
            .lua
            .load(code)
            .set_name("@user_script")
            .set_environment(self.vm.eval_env.clone())
            .into_function()
            .map_err(|e| {
                format!(
                    "ERR Error compiling script (new function): {}",
                    lua_message(&e)
                )
            })?;
        drop(shebang_owned);
        self.scripts.insert(sha.clone(), Script { func, flags });
        Ok(sha)
    }

    fn eval(&mut self, shared: &Arc<Shared>, c: &Command, out: &mut Out) {
        let name = c.arg(0).to_ascii_lowercase();
        let by_sha = name.starts_with(b"evalsha");
        let ro_cmd = name.ends_with(b"_ro");
        let (keys, argv) = match key_split(c, "ERR value is not an integer or out of range") {
            Ok(v) => v,
            Err(e) => return reply::error(out, &e),
        };
        let sha = if by_sha {
            let s = String::from_utf8_lossy(c.arg(1)).to_ascii_lowercase();
            if !self.scripts.contains_key(&s) {
                return reply::error(out, NOSCRIPT);
            }
            s
        } else {
            match self.compile(c.arg(1)) {
                Ok(s) => s,
                Err(e) => return reply::error(out, &e),
            }
        };
        let Some(script) = self.scripts.get(&sha) else {
            return reply::error(out, NOSCRIPT);
        };
        if ro_cmd && script.flags.declared && !script.flags.no_writes {
            return reply::error(
                out,
                "ERR Can not execute a script with write flag using *_ro command.",
            );
        }
        let func = script.func.clone();
        let read_only = ro_cmd || script.flags.no_writes;
        let env = self.vm.eval_env.clone();
        let set = |k: &str, items: &[&[u8]]| -> mlua::Result<()> {
            let t = self.vm.lua.create_table_with_capacity(items.len(), 0)?;
            for (i, v) in items.iter().enumerate() {
                t.raw_set(i + 1, self.vm.lua.create_string(v)?)?;
            }
            env.raw_set(k, t)
        };
        if let Err(e) = set("KEYS", &keys).and_then(|()| set("ARGV", &argv)) {
            return reply::error(out, &format!("ERR {}", lua_message(&e)));
        }
        let fname = format!("f_{sha}");
        self.run(
            shared,
            &RunSpec {
                func: &func,
                name: &fname,
                function: false,
                read_only,
            },
            MultiValue::new(),
            out,
        );
    }

    /// Runs one script or function with the gate held exclusively.
    pub(crate) fn run(
        &mut self,
        shared: &Arc<Shared>,
        spec: &RunSpec<'_>,
        args: MultiValue,
        out: &mut Out,
    ) {
        let store = &shared.store;
        let gate = store.gate();
        let _exclusive = gate.exclusive();
        gate.begin(
            spec.function,
            shared.config.busy_reply_ms.load(Ordering::Relaxed),
        );
        *shared.scripts.running.lock() = Some((spec.name.to_string(), self.current.clone()));
        let weak = Arc::downgrade(shared);
        let hooked = self
            .vm
            .lua
            .set_hook(
                HookTriggers::new().every_nth_instruction(HOOK_EVERY),
                move |_, _| {
                    if weak
                        .upgrade()
                        .is_some_and(|s| s.store.gate().kill_requested())
                    {
                        Err(api::lua_err("Script killed by user with SCRIPT KILL..."))
                    } else {
                        Ok(VmState::Continue)
                    }
                },
            )
            .is_ok();
        self.vm.resp3.set(false);
        let mut tx = Tx::in_db(store, self.db);
        tx.set_origin(self.caller);
        let ctx = RefCell::new(RunCtx {
            tx,
            read_any: false,
            shared,
            commands: &self.commands,
            client: {
                let mut c = Client::new(0, "lua".into(), true);
                c.db = self.db;
                c
            },
            read_only: spec.read_only,
            resp3: self.vm.resp3.clone(),
        });
        let vm = &self.vm;
        let res = vm.lua.scope(|scope| {
            let runner =
                scope.create_function(|lua, args: (usize, Table)| api::call(lua, &ctx, args))?;
            vm.bind.call::<()>(runner)?;
            let mut call_args = MultiValue::new();
            call_args.push_back(Value::Function(spec.func.clone()));
            call_args.extend(args);
            let r = vm.run.call::<(bool, Value)>(call_args);
            vm.bind.call::<()>(Value::Nil)?;
            let (ok, v) = r?;
            if ok {
                convert::lua_to_reply(&v, out, vm.resp3.get());
            } else {
                out.buf.extend_from_slice(&error_reply(&v, spec.name));
            }
            Ok(())
        });
        if hooked {
            self.vm.lua.remove_hook();
        }
        if let Err(e) = res {
            reply::error(
                out,
                &format!(
                    "ERR Error running script {}, {}",
                    spec.name,
                    lua_message(&e)
                ),
            );
        }
        let RunCtx { tx, read_any, .. } = ctx.into_inner();
        if let Err(e) = store.commit(tx) {
            out.buf.clear();
            reply::error(out, &e.to_string());
        } else if self.remember && read_any {
            // Client-side caching: a script that ran a read command makes its caller
            // remember every key it declared (Redis 7.0's `call()` does the same).
            let cmd = Command::from_args(&self.current);
            if let Ok((keys, _)) = key_split(&cmd, "") {
                store
                    .tracking()
                    .remember(store.pubsub(), self.caller, &keys);
            }
        }
        gate.end();
        *shared.scripts.running.lock() = None;
        // A cycle of garbage collection now and then, as Redis does every 50 runs.
        let _ = self.vm.lua.gc_step();
    }

    fn script(&mut self, shared: &Arc<Shared>, c: &Command, out: &mut Out) {
        let sub = c.arg(1);
        if is(sub, "load") && c.len() == 3 {
            match self.compile(c.arg(2)) {
                Ok(sha) => reply::bulk(out, sha.as_bytes()),
                Err(e) => reply::error(out, &e),
            }
        } else if is(sub, "exists") && c.len() >= 3 {
            reply::array_header(out, c.len() - 2);
            for a in c.args().skip(2) {
                let s = String::from_utf8_lossy(a).to_ascii_lowercase();
                reply::int(out, i64::from(self.scripts.contains_key(&s)));
            }
        } else if is(sub, "flush") && c.len() <= 3 {
            if c.len() == 3 && !is(c.arg(2), "sync") && !is(c.arg(2), "async") {
                return reply::error(out, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            self.scripts.clear();
            // Redis resets the interpreter: globals and libraries start fresh; the
            // functions live in their own environments and are loaded again.
            match Lvm::new(shared) {
                Ok(vm) => {
                    self.vm = vm;
                    let _ = self.reload_libraries(shared);
                    reply::ok(out);
                }
                Err(e) => reply::error(out, &format!("ERR {}", lua_message(&e))),
            }
        } else {
            reply::error(
                out,
                &super::super::cmd::unknown_subcommand(sub, "script").to_string(),
            );
        }
    }
}

/// A script's KEYS and ARGV.
pub(crate) type KeysArgs<'c> = (Vec<&'c [u8]>, Vec<&'c [u8]>);

/// Splits EVAL/FCALL arguments into keys and args (numkeys at 2).
pub(crate) fn key_split<'c>(c: &'c Command, not_int: &str) -> Result<KeysArgs<'c>, String> {
    let Some(n) = parse_i64(c.arg(2)) else {
        return Err(not_int.into());
    };
    let rest = c.len() - 3;
    if n < 0 {
        return Err("ERR Number of keys can't be negative".into());
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n > rest {
        return Err("ERR Number of keys can't be greater than number of args".into());
    }
    let keys = (3..3 + n).map(|i| c.arg(i)).collect();
    let argv = (3 + n..c.len()).map(|i| c.arg(i)).collect();
    Ok((keys, argv))
}

/// The reply to a failed script: the error table's `err`, with ` script: NAME, on
/// SOURCE:LINE.` when the error has a position.
pub(crate) fn error_reply(v: &Value, name: &str) -> Vec<u8> {
    let mut out = Out::new();
    let Value::Table(t) = v else {
        reply::error(
            &mut out,
            &format!("ERR Error running script {name}, execution failure"),
        );
        return out.buf;
    };
    let text = |k: &str| -> Option<String> {
        match t.raw_get::<Value>(k).ok()? {
            Value::String(s) => Some(s.to_string_lossy()),
            Value::Number(n) => Some(reply::format_double(n)),
            Value::Integer(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let mut msg = text("err").unwrap_or_else(|| "ERR unknown error".into());
    if let (Some(src), Some(line)) = (text("source"), text("line")) {
        use std::fmt::Write as _;
        let _ = write!(msg, " script: {name}, on {src}:{line}.");
    }
    reply::error(&mut out, &msg);
    out.buf
}

/// A Lua error's message, without mlua's decoration.
pub(crate) fn lua_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } | mlua::Error::RuntimeError(message) => {
            message.clone()
        }
        mlua::Error::CallbackError { cause, .. } => lua_message(cause),
        e => e.to_string(),
    }
}
