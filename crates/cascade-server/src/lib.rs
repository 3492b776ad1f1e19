//! `cascade serve`: `CascadeKV` over the Redis protocol (RESP2 and RESP3).
//!
//! Redis clients (`redis-cli`, `redis-benchmark`, redis-py, go-redis, YCSB) talk to
//! a `CascadeKV` store unchanged. Redis data types are mapped onto the ordered engine
//! (`keyspace.rs`); commands are executed by worker threads that each write to their
//! own engine log (`worker/`); durable replies are group-committed per event-loop
//! round in sync mode.
//!
//! Layers, bottom up (each uses only those below it):
//! - `hash`, `glob`, `error`, `keyspace` (engine key layout), `resp/` (parser, reply
//!   encoder), `config`, `metrics` (counters), `cursors`, `clients`, `types/` (pure
//!   codecs of `HyperLogLog`, geohash and bitfield values);
//! - `pubsub` (subscriptions, mailboxes, keyspace-notification flags), `tracking`
//!   (client-side caching: the tracking table and invalidation messages; its
//!   `commands.rs` is at the `cmd/` level);
//! - `databases` (numbered databases: prefixes, SWAPDB's map, key counts);
//! - `store` (typed keyspace over the engine, stripe locks, transactions, expiry);
//! - `shared` (the state every thread reaches: store, settings, metrics, clients);
//! - `cluster/` (cluster mode: topology, slots, redirects, migration; at the
//!   `cmd/` level);
//! - `info` (INFO and Prometheus text from one metric list), `cmd/` (command table and
//!   handlers, by family as Kvrocks's `src/commands/`: `strings/`, `bits/`, `lists/`,
//!   `zsets/`, `geo/`, `streams/`, `keyspace/`, `server/`, and one file each for
//!   hashes, sets, `HyperLogLog`, MULTI, pub/sub, scripting and replication),
//!   `scripting/` (Lua scripts and functions on their own thread);
//! - `replication/` (the stream and backlog below `store`; replicas, primaries,
//!   `WAIT` and `INFO replication` beside `cmd/`);
//! - `worker` (event loops), `http` (Prometheus endpoint), `server` (acceptor, ticker,
//!   shutdown).
//!
//! The public surface is what the `cascade` binary and the fuzz target use:
//! [`ServerConfig`], [`run`], [`ServeError`] and the request parser in [`resp::parse`].

#![deny(
    missing_docs,
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    clippy::todo,
    clippy::unimplemented,
    clippy::dbg_macro
)]
#![warn(clippy::pedantic)]

mod access;
mod clients;
mod cluster;
mod cmd;
mod commit;
mod config;
mod cursors;
mod databases;
mod durable;
mod error;
mod glob;
mod hash;
mod http;
mod inbuf;
mod info;
mod keyspace;
mod linger;
mod metrics;
mod notify;
mod pubsub;
mod replication;
pub mod resp;
mod scripting;
mod server;
mod shared;
mod slowlog;
mod store;
mod tracking;
mod types;
mod visible;
mod worker;

pub use config::ServerConfig;
pub use server::{run, ServeError};

/// The Redis version whose protocol and commands this server follows (INFO, HELLO).
pub(crate) const REDIS_COMPAT_VERSION: &str = "7.0.15";
