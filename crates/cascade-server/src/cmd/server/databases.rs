//! Numbered-database commands: `SWAPDB` and `MOVE` (`SELECT` is a connection command,
//! `conn.rs`; FLUSHDB/FLUSHALL are in `keyspace/keys.rs`). Where databases live is
//! `crate::databases`; a transaction works on one database (`Tx::in_db`).

use crate::cmd::{int_arg, spec, Ctx, Keys, Run::Ctl, Run::Data, Spec, KEY1, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{expire_key, meta_key, sub_prefix};
use crate::pubsub::class::GENERIC;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::shared::Shared;
use crate::store::Tx;

/// The database commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "swapdb",
        3,
        W,
        Keys::All,
        "server",
        "Swaps two databases.",
        Ctl(swapdb),
    ),
    spec(
        "move",
        3,
        W,
        KEY1,
        "generic",
        "Moves a key to another database.",
        Data(move_key),
    ),
];

/// A database number argument: an integer below `databases`.
pub(crate) fn db_index(shared: &Shared, arg: &[u8]) -> CmdResult<usize> {
    let n = int_arg(arg)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n < shared.store.dbs().count())
        .ok_or_else(|| CmdError::err("DB index is out of range"))
}

fn swapdb(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    // Cluster mode serves database 0 only (Redis says so before reading the indexes).
    if ctx.shared.store.cluster_mode() {
        return Err(CmdError::err("SWAPDB is not allowed in cluster mode"));
    }
    let a = int_arg(c.arg(1)).map_err(|_| CmdError::err("invalid first DB index"))?;
    let b = int_arg(c.arg(2)).map_err(|_| CmdError::err("invalid second DB index"))?;
    let count = ctx.shared.store.dbs().count();
    let (Some(a), Some(b)) = (
        usize::try_from(a).ok().filter(|&a| a < count),
        usize::try_from(b).ok().filter(|&b| b < count),
    ) else {
        return Err(CmdError::err("DB index is out of range"));
    };
    if a != b {
        // Every stripe: no command is between reading the map and committing.
        let store = &ctx.shared.store;
        let _all = store.lock_all();
        store.swap_dbs(a, b)?;
    }
    reply::ok(ctx.out);
    Ok(())
}

/// MOVE key db: the key and everything it owns go to database `db` in one batch.
/// 0 if the key is absent here or present (even expired, not yet reclaimed) there.
fn move_key(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let store = tx.store();
    if store.cluster_mode() {
        return Err(CmdError::err("MOVE is not allowed in cluster mode"));
    }
    let n = int_arg(c.arg(2))?;
    let dst_db = usize::try_from(n)
        .ok()
        .filter(|&n| n < store.dbs().count())
        .ok_or_else(|| CmdError::err("DB index is out of range"))?;
    if dst_db == tx.db() {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let dst = store.dbs().physical(dst_db).unwrap_or(0);
    let key = c.arg(1);
    let Some(meta) = tx.begin(key)? else {
        reply::int(out, 0);
        return Ok(());
    };
    if tx.get_in(dst, &meta_key(key))?.is_some() {
        reply::int(out, 0);
        return Ok(());
    }
    tx.put_in(dst, &meta_key(key), meta.encode());
    if let Some(t) = meta.expire_at {
        tx.put_in(dst, &expire_key(t, key), Vec::new());
    }
    for &ns in meta.ty.spaces() {
        for (k, v) in tx.prefix_scan(&sub_prefix(ns, key), usize::MAX)? {
            tx.put_in(dst, &k, v);
        }
    }
    tx.count_in(dst, 1, i64::from(meta.expire_at.is_some()));
    tx.touch_in(dst, key);
    tx.remove(key, &meta)?;
    tx.event(GENERIC, "move_from", key);
    tx.event_in(dst_db, GENERIC, "move_to", key);
    reply::int(out, 1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn select_move_swapdb() {
        let mut k = Kit::new();
        k.ok(&["SET", "a", "zero"]);
        k.ok(&["SELECT", "1"]);
        k.expect(&["GET", "a"], "$-1\r\n");
        k.expect(&["DBSIZE"], ":0\r\n");
        k.ok(&["SET", "a", "one"]);
        k.expect(&["RPUSH", "l", "x", "y"], ":2\r\n");
        k.expect(&["PEXPIRE", "l", "100000"], ":1\r\n");
        k.expect(&["KEYS", "*"], "*2\r\n$1\r\na\r\n$1\r\nl\r\n");
        k.expect(&["MOVE", "l", "0"], ":1\r\n");
        k.expect(&["MOVE", "a", "0"], ":0\r\n");
        k.expect(&["MOVE", "nope", "0"], ":0\r\n");
        k.expect(
            &["MOVE", "a", "1"],
            "-ERR source and destination objects are the same\r\n",
        );
        k.expect(&["MOVE", "a", "16"], "-ERR DB index is out of range\r\n");
        k.expect(&["DBSIZE"], ":1\r\n");
        k.ok(&["SELECT", "0"]);
        k.expect(&["LRANGE", "l", "0", "-1"], "*2\r\n$1\r\nx\r\n$1\r\ny\r\n");
        assert!(k.int(&["PTTL", "l"]) > 0);
        k.expect(&["GET", "a"], "$4\r\nzero\r\n");
        k.expect(&["DBSIZE"], ":2\r\n");
        k.ok(&["SWAPDB", "0", "1"]);
        k.expect(&["GET", "a"], "$3\r\none\r\n");
        k.expect(&["DBSIZE"], ":1\r\n");
        k.ok(&["SELECT", "1"]);
        k.expect(&["GET", "a"], "$4\r\nzero\r\n");
        k.ok(&["FLUSHDB"]);
        k.expect(&["DBSIZE"], ":0\r\n");
        k.ok(&["SELECT", "0"]);
        k.expect(&["GET", "a"], "$3\r\none\r\n");
        k.expect(&["SELECT", "16"], "-ERR DB index is out of range\r\n");
        k.expect(&["SWAPDB", "x", "1"], "-ERR invalid first DB index\r\n");
        k.ok(&["SELECT", "3"]);
        k.ok(&["SET", "z", "1"]);
        k.ok(&["FLUSHALL"]);
        k.expect(&["DBSIZE"], ":0\r\n");
        k.ok(&["SELECT", "0"]);
        k.expect(&["DBSIZE"], ":0\r\n");
    }

    #[test]
    fn multi_follows_select_and_watch_is_per_database() {
        let mut k = Kit::new();
        k.ok(&["MULTI"]);
        k.raw(&["SET", "k", "0"]);
        k.raw(&["SELECT", "2"]);
        k.raw(&["SET", "k", "2"]);
        k.raw(&["EXEC"]);
        k.expect(&["GET", "k"], "$1\r\n2\r\n");
        k.ok(&["SELECT", "0"]);
        k.expect(&["GET", "k"], "$1\r\n0\r\n");
        assert_eq!(k.client.db, 0);
    }

    #[test]
    fn copy_into_another_database() {
        let mut k = Kit::new();
        k.ok(&["SET", "s", "v"]);
        k.expect(&["RPUSH", "l", "x", "y"], ":2\r\n");
        k.expect(&["PEXPIRE", "l", "100000"], ":1\r\n");
        k.expect(&["COPY", "s", "s2", "DB", "3"], ":1\r\n");
        k.expect(&["COPY", "l", "l", "DB", "3"], ":1\r\n");
        k.expect(&["COPY", "s", "s2", "DB", "3"], ":0\r\n");
        k.expect(
            &["COPY", "s", "s", "DB", "0"],
            "-ERR source and destination objects are the same\r\n",
        );
        k.expect(
            &["COPY", "s", "s2", "DB", "16"],
            "-ERR DB index is out of range\r\n",
        );
        k.expect(
            &["COPY", "s", "s2", "DB", "x"],
            "-ERR value is not an integer or out of range\r\n",
        );
        k.expect(&["DBSIZE"], ":2\r\n");
        k.ok(&["SET", "s", "new"]);
        k.expect(&["COPY", "s", "s2", "DB", "3", "REPLACE"], ":1\r\n");
        k.ok(&["SELECT", "3"]);
        k.expect(&["DBSIZE"], ":2\r\n");
        k.expect(&["GET", "s2"], "$3\r\nnew\r\n");
        k.expect(&["LRANGE", "l", "0", "-1"], "*2\r\n$1\r\nx\r\n$1\r\ny\r\n");
        assert!(k.int(&["PTTL", "l"]) > 0);
        // The copies are independent of their sources.
        k.expect(&["RPUSH", "l", "z"], ":3\r\n");
        k.ok(&["SELECT", "0"]);
        k.expect(&["LLEN", "l"], ":2\r\n");
        // Inside MULTI the block goes on in its own database.
        k.ok(&["MULTI"]);
        k.raw(&["COPY", "s", "t", "DB", "5"]);
        k.raw(&["SET", "u", "1"]);
        assert_eq!(k.raw(&["EXEC"]), "*2\r\n:1\r\n+OK\r\n");
        k.expect(&["EXISTS", "u", "t"], ":1\r\n");
        k.ok(&["SELECT", "5"]);
        k.expect(&["KEYS", "*"], "*1\r\n$1\r\nt\r\n");
    }

    /// FLUSHDB inside MULTI empties the database selected at that point, and only it:
    /// what the block wrote to other databases stays, and reads after a later SELECT
    /// see the other database whole.
    #[test]
    fn flushdb_in_multi_empties_only_the_selected_database() {
        let mut k = Kit::new();
        k.ok(&["SET", "a", "zero"]);
        k.ok(&["SELECT", "1"]);
        k.ok(&["SET", "a", "one"]);
        k.ok(&["SELECT", "0"]);
        k.ok(&["MULTI"]);
        k.raw(&["FLUSHDB"]);
        k.raw(&["SELECT", "1"]);
        k.raw(&["GET", "a"]);
        k.raw(&["SET", "b", "one"]);
        assert_eq!(k.raw(&["EXEC"]), "*4\r\n+OK\r\n+OK\r\n$3\r\none\r\n+OK\r\n");
        k.expect(&["DBSIZE"], ":2\r\n");
        k.expect(&["GET", "a"], "$3\r\none\r\n");
        k.ok(&["SELECT", "0"]);
        k.expect(&["DBSIZE"], ":0\r\n");
        k.expect(&["GET", "a"], "$-1\r\n");
        // Writes to database 0, then FLUSHDB of database 1, in one block.
        k.ok(&["SET", "c", "zero"]);
        k.ok(&["MULTI"]);
        k.raw(&["SET", "d", "zero"]);
        k.raw(&["SELECT", "1"]);
        k.raw(&["SET", "e", "one"]);
        k.raw(&["FLUSHDB"]);
        k.raw(&["SET", "f", "one"]);
        k.raw(&["SELECT", "0"]);
        k.raw(&["GET", "d"]);
        k.raw(&["DBSIZE"]);
        assert_eq!(
            k.raw(&["EXEC"]),
            "*8\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n$4\r\nzero\r\n:2\r\n"
        );
        k.expect(&["DBSIZE"], ":2\r\n");
        k.expect(&["MGET", "c", "d"], "*2\r\n$4\r\nzero\r\n$4\r\nzero\r\n");
        k.ok(&["SELECT", "1"]);
        k.expect(&["KEYS", "*"], "*1\r\n$1\r\nf\r\n");
        k.expect(&["DBSIZE"], ":1\r\n");
    }
}
