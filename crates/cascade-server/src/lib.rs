//! `cascade serve`: CascadeKV over the Redis protocol (RESP2).
//!
//! Redis clients (`redis-cli`, `redis-benchmark`, redis-py, go-redis, YCSB) talk to
//! a CascadeKV store unchanged. Strings, hashes and a sorted-set subset are mapped
//! onto the ordered engine (`keyspace.rs`); commands are executed by worker threads
//! that each write to their own engine log (`worker.rs`); durable replies are
//! group-committed per event-loop round in sync mode.
//!
//! Module map: `resp/` (parser, reply encoder), `cmd/` (command table and handlers),
//! `store` (typed keyspace, locks, expiry), `keyspace` (engine key layout), `worker`
//! (event loop), `server` (acceptor, shutdown), `config`, `metrics`, `info`, `http`
//! (Prometheus), `glob` (patterns).

#![warn(missing_docs)]

pub mod cmd;
pub mod config;
pub mod error;
pub mod glob;
pub mod http;
pub mod info;
pub mod keyspace;
pub mod metrics;
pub mod resp;
pub mod server;
pub mod store;
pub mod worker;

pub use config::ServerConfig;
pub use server::{run, ServeError};

/// The Redis version whose protocol and commands this server follows (INFO, HELLO).
pub const REDIS_COMPAT_VERSION: &str = "7.0.0";
