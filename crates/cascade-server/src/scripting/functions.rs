//! Function libraries: `FUNCTION LOAD|LIST|DELETE|FLUSH|DUMP|RESTORE|HELP`, `FCALL`
//! and `FCALL_RO` (STATS and KILL are answered by workers, `cmd/scripting.rs`).
//!
//! A library is Lua code that starts with `#!lua name=<lib>`; loading runs it once
//! (chunk `@user_function`, a 500 ms budget) in an environment whose `redis` offers
//! `register_function` and little else, then gives that environment the full API for
//! the registered callbacks. Libraries live on the script thread only ([`Libraries`],
//! no lock) and are persisted as `0x0C name → code` engine entries (docs/formats.md),
//! written before FUNCTION LOAD/DELETE/FLUSH/RESTORE reply and loaded again at
//! start-up ([`Engine::load_stored`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Function, HookTriggers, MultiValue, Table, Value, VmState};

use super::api::lua_err;
use super::engine::{key_split, lua_message, parse_flag, Engine, Flags, Lvm, RunSpec};
use crate::cmd::is;
use crate::glob::matches as glob_match;
use crate::keyspace::NS_FUNCTION;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::shared::Shared;

/// One registered function.
#[derive(Clone)]
pub(crate) struct Func {
    name: String,
    desc: Option<Vec<u8>>,
    flags: Flags,
    callback: Function,
}

/// One library.
#[derive(Clone)]
pub(crate) struct Library {
    code: Vec<u8>,
    functions: Vec<Func>,
}

/// Every library, by name.
#[derive(Default)]
pub(crate) struct Libraries {
    libs: BTreeMap<String, Library>,
}

impl Libraries {
    fn find(&self, name: &str) -> Option<&Func> {
        self.libs
            .values()
            .flat_map(|l| l.functions.iter())
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// The stored spelling of a library name (names ignore case).
    fn lib_name(&self, name: &str) -> Option<String> {
        self.libs
            .keys()
            .find(|k| k.eq_ignore_ascii_case(name))
            .cloned()
    }

    fn function_count(&self) -> usize {
        self.libs.values().map(|l| l.functions.len()).sum()
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

const BAD_NAME: &str = "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Parses `#!lua name=x`: the library name.
fn metadata(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let end = code
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| "ERR Invalid library metadata".to_string())?;
    let line = String::from_utf8_lossy(&code[2..end]).into_owned();
    let (engine, rest) = line.split_once([' ', '\t']).unwrap_or((&line, ""));
    let mut name = None;
    for p in rest.split_ascii_whitespace() {
        match p.strip_prefix("name=").map(|n| n.trim_matches('"')) {
            Some(n) if name.is_none() => name = Some(n.to_string()),
            Some(_) => {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                )
            }
            None => return Err(format!("ERR Invalid metadata value given: {p}")),
        }
    }
    let name = name.ok_or("ERR Library name was not given")?;
    if !valid_name(&name) {
        return Err(BAD_NAME.into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    Ok(name)
}

/// Reads `register_function`'s arguments.
fn registration(args: &MultiValue) -> mlua::Result<Func> {
    let string = |v: &Value| match v {
        Value::String(s) => Some(s.to_string_lossy()),
        Value::Number(n) => Some(reply::format_double(*n)),
        Value::Integer(n) => Some(n.to_string()),
        _ => None,
    };
    match args.len() {
        2 => {
            let name = string(&args[0]).ok_or_else(|| {
                lua_err("first argument to redis.register_function must be a string")
            })?;
            let Value::Function(f) = &args[1] else {
                return Err(lua_err(
                    "second argument to redis.register_function must be a function",
                ));
            };
            Ok(Func {
                name,
                desc: None,
                flags: Flags {
                    declared: true,
                    ..Flags::default()
                },
                callback: f.clone(),
            })
        }
        1 => {
            let Value::Table(t) = &args[0] else {
                return Err(lua_err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."));
            };
            let (mut name, mut desc, mut cb) = (None, None, None);
            let mut flags = Flags {
                declared: true,
                ..Flags::default()
            };
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Value::String(k) = k else {
                    return Err(lua_err(
                        "named argument key given to redis.register_function is not a string",
                    ));
                };
                match k.to_string_lossy().to_ascii_lowercase().as_str() {
                    "function_name" => {
                        name = Some(string(&v).ok_or_else(|| lua_err("function_name argument given to redis.register_function must be a string"))?);
                    }
                    "description" => {
                        desc = Some(string(&v).ok_or_else(|| lua_err("description argument given to redis.register_function must be a string"))?.into_bytes());
                    }
                    "callback" => {
                        let Value::Function(f) = v else {
                            return Err(lua_err("callback argument given to redis.register_function must be a function"));
                        };
                        cb = Some(f);
                    }
                    "flags" => {
                        let Value::Table(ft) = v else {
                            return Err(lua_err("flags argument to redis.register_function must be a table representing function flags"));
                        };
                        for f in ft.sequence_values::<Value>() {
                            let ok = string(&f?).is_some_and(|s| parse_flag(&s, &mut flags));
                            if !ok {
                                return Err(lua_err("unknown flag given"));
                            }
                        }
                    }
                    _ => return Err(lua_err("unknown argument given to redis.register_function")),
                }
            }
            let name = name.ok_or_else(|| {
                lua_err("redis.register_function must get a function name argument")
            })?;
            let callback =
                cb.ok_or_else(|| lua_err("redis.register_function must get a callback argument"))?;
            Ok(Func {
                name,
                desc,
                flags,
                callback,
            })
        }
        _ => Err(lua_err(
            "wrong number of arguments to redis.register_function",
        )),
    }
}

/// Runs a library's code and collects its functions.
fn compile_library(vm: &Lvm, code: &[u8]) -> Result<(String, Library), String> {
    let name = metadata(code)?;
    let found: Rc<RefCell<Vec<Func>>> = Rc::default();
    let loading = Rc::new(std::cell::Cell::new(true));
    let (sink, open) = (found.clone(), loading.clone());
    let register = vm
        .lua
        .create_function(move |_, args: MultiValue| {
            if !open.get() {
                return Err(lua_err(
                    "redis.register_function can only be called on FUNCTION LOAD command",
                ));
            }
            let f = registration(&args)?;
            if !valid_name(&f.name) {
                return Err(lua_err(&BAD_NAME[4..]));
            }
            let mut s = sink.borrow_mut();
            if s.iter().any(|g| g.name.eq_ignore_ascii_case(&f.name)) {
                return Err(lua_err("Function already exists in the library"));
            }
            s.push(f);
            Ok(())
        })
        .map_err(|e| format!("ERR {}", lua_message(&e)))?;
    let env: Table = vm
        .load_env
        .call(register)
        .map_err(|e| format!("ERR {}", lua_message(&e)))?;
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let func = vm
        .lua
        .load(&code[end..])
        .set_name("@user_function")
        .set_environment(env.clone())
        .into_function()
        .map_err(|e| format!("ERR Error compiling function: {}", lua_message(&e)))?;
    let deadline = Instant::now() + Duration::from_millis(500);
    let _ = vm.lua.set_hook(
        HookTriggers::new().every_nth_instruction(100_000),
        move |_, _| {
            if Instant::now() > deadline {
                Err(lua_err("FUNCTION LOAD timeout"))
            } else {
                Ok(VmState::Continue)
            }
        },
    );
    let r = vm.run.call::<(bool, Value)>(func);
    vm.lua.remove_hook();
    loading.set(false);
    let (ok, v) = r.map_err(|e| format!("ERR {}", lua_message(&e)))?;
    if !ok {
        let msg = match &v {
            Value::Table(t) => t
                .raw_get::<mlua::LuaString>("err")
                .map(|s| s.to_string_lossy())
                .unwrap_or_default(),
            _ => String::new(),
        };
        return Err(format!("ERR Error registering functions: {msg}"));
    }
    let functions = std::mem::take(&mut *found.borrow_mut());
    if functions.is_empty() {
        return Err("ERR No functions registered".into());
    }
    vm.finish_env
        .call::<()>(env)
        .map_err(|e| format!("ERR {}", lua_message(&e)))?;
    Ok((
        name,
        Library {
            code: code.to_vec(),
            functions,
        },
    ))
}

/// The engine key of a library.
fn lib_key(name: &str) -> Vec<u8> {
    let mut k = vec![NS_FUNCTION];
    k.extend_from_slice(name.as_bytes());
    k
}

const DUMP_VERSION: u16 = 1;

impl Engine {
    /// Loads the libraries stored in the engine (start-up).
    pub(crate) fn load_stored(&mut self, shared: &Arc<Shared>) -> Result<(), String> {
        let db = shared.store.db();
        let it = db
            .iter_bounds(
                Bound::Included(vec![NS_FUNCTION]),
                Bound::Excluded(vec![NS_FUNCTION + 1]),
            )
            .map_err(|e| e.to_string())?;
        for kv in it {
            let (_, code) = kv.map_err(|e| e.to_string())?;
            let (name, lib) = compile_library(&self.vm, &code)?;
            self.libs.libs.insert(name, lib);
        }
        Ok(())
    }

    /// After the interpreter was reset: compiles every library again.
    pub(crate) fn reload_libraries(&mut self, _shared: &Arc<Shared>) -> Result<(), String> {
        let codes: Vec<Vec<u8>> = self.libs.libs.values().map(|l| l.code.clone()).collect();
        self.libs.libs.clear();
        for code in codes {
            let (name, lib) = compile_library(&self.vm, &code)?;
            self.libs.libs.insert(name, lib);
        }
        Ok(())
    }

    /// Replaces the stored libraries' entries: `remove` then `put`.
    fn persist(shared: &Shared, remove: &[String], put: &[(&str, &[u8])]) -> Result<(), String> {
        let mut b = cascadekv::WriteBatch::new();
        for n in remove {
            b.delete(lib_key(n));
        }
        for (n, code) in put {
            b.put(lib_key(n), code.to_vec());
        }
        crate::durable::note_write();
        shared
            .store
            .db()
            .write(&b)
            .map_err(|e| format!("ERR storage error: {e}"))
    }

    pub(crate) fn fcall(&mut self, shared: &Arc<Shared>, c: &Command, out: &mut Out) {
        let ro_cmd = c.arg(0).eq_ignore_ascii_case(b"fcall_ro");
        let fname = String::from_utf8_lossy(c.arg(1)).into_owned();
        let Some(f) = self.libs.find(&fname).cloned() else {
            return reply::error(out, "ERR Function not found");
        };
        let (keys, argv) = match key_split(c, "ERR Bad number of keys provided") {
            Ok(v) => v,
            Err(e) => return reply::error(out, &e),
        };
        if ro_cmd && !f.flags.no_writes {
            return reply::error(
                out,
                "ERR Can not execute a script with write flag using *_ro command.",
            );
        }
        let lua = &self.vm.lua;
        let make = |items: &[&[u8]]| -> mlua::Result<Table> {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, v) in items.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(v)?)?;
            }
            Ok(t)
        };
        let call_args = match (make(&keys), make(&argv)) {
            (Ok(k), Ok(a)) => MultiValue::from_iter([Value::Table(k), Value::Table(a)]),
            (Err(e), _) | (_, Err(e)) => {
                return reply::error(out, &format!("ERR {}", lua_message(&e)))
            }
        };
        self.run(
            shared,
            &RunSpec {
                func: &f.callback,
                name: &f.name,
                function: true,
                read_only: ro_cmd || f.flags.no_writes,
            },
            call_args,
            out,
        );
    }

    pub(crate) fn function(&mut self, shared: &Arc<Shared>, c: &Command, out: &mut Out) {
        let sub = c.arg(1);
        let res = if is(sub, "load") {
            self.function_load(shared, c, out)
        } else if is(sub, "list") {
            self.function_list(c, out)
        } else if is(sub, "delete") && c.len() == 3 {
            let name = String::from_utf8_lossy(c.arg(2)).into_owned();
            if let Some(name) = self.libs.lib_name(&name) {
                Self::persist(shared, std::slice::from_ref(&name), &[]).map(|()| {
                    self.libs.libs.remove(&name);
                    reply::ok(out);
                })
            } else {
                Err("ERR Library not found".into())
            }
        } else if is(sub, "flush") && c.len() <= 3 {
            if c.len() == 3 && !is(c.arg(2), "sync") && !is(c.arg(2), "async") {
                Err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option".into())
            } else {
                let names: Vec<String> = self.libs.libs.keys().cloned().collect();
                Self::persist(shared, &names, &[]).map(|()| {
                    self.libs.libs.clear();
                    reply::ok(out);
                })
            }
        } else if is(sub, "dump") && c.len() == 2 {
            reply::bulk(out, &self.dump());
            Ok(())
        } else if is(sub, "restore") && (3..=4).contains(&c.len()) {
            self.restore(shared, c, out)
        } else {
            Err(crate::cmd::unknown_subcommand(sub, "function").to_string())
        };
        if let Err(e) = res {
            reply::error(out, &e);
        }
    }

    fn function_load(
        &mut self,
        shared: &Arc<Shared>,
        c: &Command,
        out: &mut Out,
    ) -> Result<(), String> {
        let mut replace = false;
        let mut i = 2;
        while i < c.len() - 1 {
            if is(c.arg(i), "replace") {
                replace = true;
            } else {
                return Err(format!(
                    "ERR Unknown option given: {}",
                    String::from_utf8_lossy(c.arg(i))
                ));
            }
            i += 1;
        }
        if i >= c.len() {
            return Err("ERR Function code is missing".into());
        }
        let (name, lib) = compile_library(&self.vm, c.arg(i))?;
        self.join(vec![(name.clone(), lib)], replace, true)?;
        if let Err(e) = Self::persist(shared, &[], &[(&name, c.arg(i))]) {
            self.libs.libs.remove(&name);
            return Err(e);
        }
        reply::bulk(out, name.as_bytes());
        Ok(())
    }

    /// Adds libraries, all or none: an existing name fails unless `replace`, and a
    /// function name taken by another library always fails.
    fn join(
        &mut self,
        new: Vec<(String, Library)>,
        replace: bool,
        quoted: bool,
    ) -> Result<(), String> {
        for (name, _) in &new {
            if let Some(old) = self.libs.lib_name(name) {
                if !replace {
                    return Err(if quoted {
                        format!("ERR Library '{name}' already exists")
                    } else {
                        format!("ERR Library {name} already exists")
                    });
                }
                if old != *name {
                    self.libs.libs.remove(&old);
                }
            }
        }
        for (name, lib) in &new {
            for f in &lib.functions {
                let clash = self.libs.libs.iter().any(|(n, l)| {
                    !n.eq_ignore_ascii_case(name)
                        && l.functions
                            .iter()
                            .any(|g| g.name.eq_ignore_ascii_case(&f.name))
                });
                if clash {
                    return Err(format!("ERR Function {} already exists", f.name));
                }
            }
        }
        for (name, lib) in new {
            self.libs.libs.insert(name, lib);
        }
        Ok(())
    }

    fn function_list(&self, c: &Command, out: &mut Out) -> Result<(), String> {
        let (mut code, mut pattern) = (false, None);
        let mut i = 2;
        while i < c.len() {
            if !code && is(c.arg(i), "withcode") {
                code = true;
            } else if pattern.is_none() && is(c.arg(i), "libraryname") {
                if i + 1 >= c.len() {
                    return Err("ERR library name argument was not given".into());
                }
                pattern = Some(c.arg(i + 1).to_vec());
                i += 1;
            } else {
                return Err(format!(
                    "ERR Unknown argument {}",
                    String::from_utf8_lossy(c.arg(i))
                ));
            }
            i += 1;
        }
        let libs: Vec<(&String, &Library)> = self
            .libs
            .libs
            .iter()
            .filter(|(n, _)| {
                pattern
                    .as_ref()
                    .is_none_or(|p| glob_match(p, n.as_bytes(), true))
            })
            .collect();
        reply::array_header(out, libs.len());
        for (name, lib) in libs {
            reply::map_header(out, if code { 4 } else { 3 });
            reply::bulk(out, b"library_name");
            reply::bulk(out, name.as_bytes());
            reply::bulk(out, b"engine");
            reply::bulk(out, b"LUA");
            reply::bulk(out, b"functions");
            reply::array_header(out, lib.functions.len());
            for f in &lib.functions {
                reply::map_header(out, 3);
                reply::bulk(out, b"name");
                reply::bulk(out, f.name.as_bytes());
                reply::bulk(out, b"description");
                reply::opt_bulk(out, f.desc.as_deref());
                reply::bulk(out, b"flags");
                reply::set_header(out, usize::from(f.flags.no_writes));
                if f.flags.no_writes {
                    reply::simple(out, "no-writes");
                }
            }
            if code {
                reply::bulk(out, b"library_code");
                reply::bulk(out, &lib.code);
            }
        }
        Ok(())
    }

    /// FUNCTION DUMP's payload (docs/formats.md): per library `u32 BE length, code`,
    /// then the version (u16 LE) and a 64-bit checksum (LE) of everything before it.
    fn dump(&self) -> Vec<u8> {
        let mut p = Vec::new();
        for lib in self.libs.libs.values() {
            let n = u32::try_from(lib.code.len()).unwrap_or(u32::MAX);
            p.extend_from_slice(&n.to_be_bytes());
            p.extend_from_slice(&lib.code);
        }
        p.extend_from_slice(&DUMP_VERSION.to_le_bytes());
        let sum = crate::hash::hash64(&p);
        p.extend_from_slice(&sum.to_le_bytes());
        p
    }

    fn restore(&mut self, shared: &Arc<Shared>, c: &Command, out: &mut Out) -> Result<(), String> {
        let policy = if c.len() == 4 {
            let p = c.arg(3).to_ascii_lowercase();
            match p.as_slice() {
                b"append" | b"replace" | b"flush" => p,
                _ => return Err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.".into()),
            }
        } else {
            b"append".to_vec()
        };
        let data = c.arg(2);
        let bad = || "ERR DUMP payload version or checksum are wrong".to_string();
        if data.len() < 10 {
            return Err(bad());
        }
        let (body, sum) = data.split_at(data.len() - 8);
        let sum = u64::from_le_bytes(sum.try_into().map_err(|_| bad())?);
        let ver = u16::from_le_bytes(body[body.len() - 2..].try_into().map_err(|_| bad())?);
        if ver != DUMP_VERSION || crate::hash::hash64(body) != sum {
            return Err(bad());
        }
        let mut libs = Vec::new();
        let mut rest = &body[..body.len() - 2];
        while !rest.is_empty() {
            let n = rest
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_be_bytes)
                .ok_or("ERR failed loading the given functions payload")?;
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            let code = rest
                .get(4..4 + n)
                .ok_or("ERR failed loading the given functions payload")?;
            libs.push(compile_library(&self.vm, code)?);
            rest = &rest[4 + n..];
        }
        let old: Vec<String> = self.libs.libs.keys().cloned().collect();
        let saved = std::mem::take(&mut self.libs.libs);
        if policy != b"flush" {
            self.libs.libs = saved.clone();
        }
        if let Err(e) = self.join(libs, policy == b"replace", false) {
            self.libs.libs = saved;
            return Err(e);
        }
        let puts: Vec<(&str, &[u8])> = self
            .libs
            .libs
            .iter()
            .map(|(n, l)| (n.as_str(), l.code.as_slice()))
            .collect();
        if let Err(e) = Self::persist(shared, &old, &puts) {
            self.libs.libs = saved;
            return Err(e);
        }
        reply::ok(out);
        Ok(())
    }

    /// FUNCTION STATS' engine counts: (libraries, functions).
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.libs.libs.len(), self.libs.function_count())
    }
}
