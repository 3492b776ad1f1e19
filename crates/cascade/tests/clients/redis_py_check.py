#!/usr/bin/env python3
"""Drives a `cascade serve` on PORT with the redis-py client and asserts the replies.

Usage: python3 redis_py_check.py PORT

Run by `cargo test -p cascade --test clients python_redis_client`. Exits non-zero
(an AssertionError with the failing check) when a reply is not what Redis gives.
Against a real redis-server (no `cascade_version` in INFO) the cascade-only checks —
CASCADE.RANGE and keys returned in key order — are skipped, so the script itself can be
checked against Redis.

redis-py >= 8 speaks RESP3 by default (HELLO 3), so the common checks run twice:
once with protocol=2 and once with the client's default protocol.
"""

import sys
import time
import warnings

import redis

# setex/psetex/getset are marked deprecated in redis-py; they are still Redis commands.
warnings.simplefilter("ignore", DeprecationWarning)

PORT = int(sys.argv[1])
VERSION = tuple(int(x) for x in redis.__version__.split(".")[:2] if x.isdigit())


def check(name, got, want):
    assert got == want, f"{name}: got {got!r}, want {want!r}"


def expect_error(fn, text, name):
    try:
        got = fn()
    except redis.ResponseError as e:
        assert text in str(e), f"{name}: error {str(e)!r} does not contain {text!r}"
        return str(e)
    raise AssertionError(f"{name}: expected ResponseError {text!r}, got reply {got!r}")


def strings(r):
    check("set", r.set(b"s:a", b"1"), True)
    check("get", r.get(b"s:a"), b"1")
    check("get missing", r.get(b"s:missing"), None)
    check("set nx existing", r.set(b"s:a", b"2", nx=True), None)
    check("set nx new", r.set(b"s:b", b"2", nx=True), True)
    check("set xx missing", r.set(b"s:c", b"3", xx=True), None)
    check("exists after xx", r.exists(b"s:c"), 0)
    check("set xx existing", r.set(b"s:b", b"22", xx=True), True)
    check("get after xx", r.get(b"s:b"), b"22")
    check("set get", r.set(b"s:b", b"23", get=True), b"22")
    check("set get missing", r.set(b"s:new", b"v", get=True), None)
    check("set ex", r.set(b"s:ex", b"v", ex=100), True)
    ttl = r.ttl(b"s:ex")
    assert 99 <= ttl <= 100, f"ttl after set ex=100: {ttl}"
    check("set px", r.set(b"s:px", b"v", px=100_000), True)
    pttl = r.pttl(b"s:px")
    assert 90_000 < pttl <= 100_000, f"pttl after set px=100000: {pttl}"
    check("incr new", r.incr(b"s:n"), 1)
    check("incrby", r.incrby(b"s:n", 41), 42)
    check("decr", r.decr(b"s:n"), 41)
    check("decrby", r.decrby(b"s:n", 50), -9)
    check("get counter", r.get(b"s:n"), b"-9")
    check("append new", r.append(b"s:app", b"hello"), 5)
    check("append", r.append(b"s:app", b" world"), 11)
    check("strlen", r.strlen(b"s:app"), 11)
    check("strlen missing", r.strlen(b"s:missing"), 0)
    check("get appended", r.get(b"s:app"), b"hello world")
    check("getdel", r.getdel(b"s:app"), b"hello world")
    check("getdel gone", r.getdel(b"s:app"), None)
    check("mset", r.mset({b"s:m1": b"a", b"s:m2": b"b", b"s:m3": b"c"}), True)
    check("mget", r.mget([b"s:m1", b"s:nope", b"s:m3", b"s:m2"]), [b"a", None, b"c", b"b"])
    check("setnx existing", r.setnx(b"s:m1", b"x"), False)
    check("setnx new", r.setnx(b"s:m4", b"d"), True)
    check("get setnx", r.get(b"s:m4"), b"d")
    check("getset", r.getset(b"s:m4", b"e"), b"d")
    check("setex", r.setex(b"s:se", 60, b"v"), True)
    assert 59 <= r.ttl(b"s:se") <= 60
    check("psetex", r.psetex(b"s:pse", 60_000, b"v"), True)
    assert 59_000 <= r.pttl(b"s:pse") <= 60_000
    check("incr float-ish", r.set(b"s:f", b"1.5"), True)
    expect_error(lambda: r.incr(b"s:f"), "value is not an integer or out of range", "incr 1.5")


def expiry(r):
    r.set(b"e:k", b"v")
    check("ttl no expiry", r.ttl(b"e:k"), -1)
    check("pttl no expiry", r.pttl(b"e:k"), -1)
    check("ttl missing", r.ttl(b"e:missing"), -2)
    check("pttl missing", r.pttl(b"e:missing"), -2)
    check("expire", r.expire(b"e:k", 100), True)
    assert 99 <= r.ttl(b"e:k") <= 100
    check("expire missing", r.expire(b"e:missing", 100), False)
    check("persist", r.persist(b"e:k"), True)
    check("ttl after persist", r.ttl(b"e:k"), -1)
    check("persist again", r.persist(b"e:k"), False)
    check("pexpire", r.pexpire(b"e:k", 100_000), True)
    assert 90_000 < r.pttl(b"e:k") <= 100_000
    check("expireat", r.expireat(b"e:k", int(time.time()) + 1000), True)
    assert 990 <= r.ttl(b"e:k") <= 1000
    check("pexpireat", r.pexpireat(b"e:k", int(time.time() * 1000) + 500_000), True)
    assert 490 <= r.ttl(b"e:k") <= 500
    check("expireat past", r.expireat(b"e:k", 1), True)
    check("gone after expireat past", r.exists(b"e:k"), 0)
    check("set px 50", r.set(b"e:short", b"v", px=50), True)
    check("short exists", r.get(b"e:short"), b"v")
    time.sleep(0.2)
    check("short gone", r.get(b"e:short"), None)
    check("short exists after", r.exists(b"e:short"), 0)
    check("short ttl after", r.ttl(b"e:short"), -2)
    # An overwrite without KEEPTTL clears the expiry; with KEEPTTL keeps it.
    r.set(b"e:kt", b"v", ex=100)
    r.set(b"e:kt", b"w", keepttl=True)
    assert 99 <= r.ttl(b"e:kt") <= 100
    r.set(b"e:kt", b"x")
    check("ttl after plain overwrite", r.ttl(b"e:kt"), -1)


def hashes(r):
    check("hset mapping", r.hset(b"h:1", mapping={b"name": b"ada", b"lang": b"rust"}), 2)
    check("hset update", r.hset(b"h:1", b"name", b"grace"), 0)
    check("hset key/value", r.hset(b"h:1", b"year", b"1906"), 1)
    check("hget", r.hget(b"h:1", b"name"), b"grace")
    check("hget missing field", r.hget(b"h:1", b"nope"), None)
    check("hget missing key", r.hget(b"h:nope", b"name"), None)
    check("hmget", r.hmget(b"h:1", [b"lang", b"nope", b"name"]), [b"rust", None, b"grace"])
    check(
        "hgetall",
        r.hgetall(b"h:1"),
        {b"name": b"grace", b"lang": b"rust", b"year": b"1906"},
    )
    check("hgetall missing", r.hgetall(b"h:nope"), {})
    check("hlen", r.hlen(b"h:1"), 3)
    check("hexists", r.hexists(b"h:1", b"lang"), True)
    check("hexists missing", r.hexists(b"h:1", b"nope"), False)
    check("hkeys", sorted(r.hkeys(b"h:1")), [b"lang", b"name", b"year"])
    check("hvals", sorted(r.hvals(b"h:1")), [b"1906", b"grace", b"rust"])
    check("hstrlen", r.hstrlen(b"h:1", b"name"), 5)
    check("hincrby new", r.hincrby(b"h:1", b"visits", 5), 5)
    check("hincrby", r.hincrby(b"h:1", b"visits", -7), -2)
    check("hincrby year", r.hincrby(b"h:1", b"year", 1), 1907)
    expect_error(lambda: r.hincrby(b"h:1", b"name", 1), "hash value is not an integer", "hincrby str")
    check("hsetnx existing", r.hsetnx(b"h:1", b"name", b"x"), False)
    check("hsetnx new", r.hsetnx(b"h:1", b"born", b"1815"), True)
    check("hdel", r.hdel(b"h:1", b"lang", b"nope", b"born"), 2)
    check("hlen after hdel", r.hlen(b"h:1"), 3)
    check("hdel all", r.hdel(b"h:1", b"name", b"year", b"visits"), 3)
    check("empty hash is deleted", r.exists(b"h:1"), 0)
    check("type after empty", r.type(b"h:1"), b"none")


def zsets(r):
    check("zadd", r.zadd(b"z:1", {b"a": 1, b"b": 2, b"c": 3, b"d": 4}), 4)
    check("zadd update", r.zadd(b"z:1", {b"a": 1.5, b"e": 5}), 1)
    check("zadd nx", r.zadd(b"z:1", {b"a": 100, b"f": 6}, nx=True), 1)
    check("zadd xx ch", r.zadd(b"z:1", {b"a": 0.5, b"zz": 9}, xx=True, ch=True), 1)
    check("zscore", r.zscore(b"z:1", b"a"), 0.5)
    check("zscore missing", r.zscore(b"z:1", b"nope"), None)
    check("zcard", r.zcard(b"z:1"), 6)
    check("zcard missing", r.zcard(b"z:nope"), 0)
    check(
        "zrangebyscore all",
        r.zrangebyscore(b"z:1", "-inf", "+inf"),
        [b"a", b"b", b"c", b"d", b"e", b"f"],
    )
    check(
        "zrangebyscore withscores",
        r.zrangebyscore(b"z:1", 2, 4, withscores=True),
        [(b"b", 2.0), (b"c", 3.0), (b"d", 4.0)],
    )
    check(
        "zrangebyscore limit",
        r.zrangebyscore(b"z:1", "-inf", "+inf", start=1, num=2),
        [b"b", b"c"],
    )
    check(
        "zrangebyscore exclusive",
        r.zrangebyscore(b"z:1", "(2", "(5"),
        [b"c", b"d"],
    )
    check("zrangebyscore empty", r.zrangebyscore(b"z:1", 10, 20), [])
    check("zcount", r.zcount(b"z:1", 2, "+inf"), 5)
    check("zcount exclusive", r.zcount(b"z:1", "(2", "(5"), 2)
    # Equal scores are ordered by member bytes.
    r.zadd(b"z:2", {b"m3": 1, b"m1": 1, b"m2": 1, b"m0": 0})
    check("ties by member", r.zrangebyscore(b"z:2", 1, 1), [b"m1", b"m2", b"m3"])
    r.zadd(b"z:2", {b"neg": -2.25})
    check("negative score", r.zscore(b"z:2", b"neg"), -2.25)
    check("zrem", r.zrem(b"z:1", b"a", b"nope", b"b"), 2)
    check("zcard after zrem", r.zcard(b"z:1"), 4)
    check("zrem rest", r.zrem(b"z:1", b"c", b"d", b"e", b"f"), 4)
    check("empty zset is deleted", r.exists(b"z:1"), 0)
    expect_error(lambda: r.zadd(b"z:2", {b"x": "nan"}), "not a valid float", "zadd nan")


def keyspace(r, cascade):
    r.flushdb()
    check("dbsize empty", r.dbsize(), 0)
    names = [f"user:{i:04}".encode() for i in range(300)] + [
        f"item:{i:04}".encode() for i in range(200)
    ]
    pipe = r.pipeline(transaction=False)
    for k in names:
        pipe.set(k, b"v")
    pipe.hset(b"hash:1", b"f", b"v")
    pipe.zadd(b"zset:1", {b"m": 1})
    pipe.execute()
    check("dbsize", r.dbsize(), 502)
    every = list(r.scan_iter(count=37))
    check("scan_iter all count", len(every), 502)
    check("scan_iter no duplicates", len(set(every)), 502)
    users = list(r.scan_iter(match=b"user:*", count=50))
    check("scan_iter match", sorted(users), sorted(k for k in names if k.startswith(b"user:")))
    if cascade:
        check("scan_iter in key order", every, sorted(every))
        check("scan_iter match in key order", users, sorted(users))
    hashes_only = list(r.scan_iter(_type="hash"))
    check("scan type", hashes_only, [b"hash:1"])
    check("keys", sorted(r.keys(b"item:01*")), [f"item:01{i:02}".encode() for i in range(100)])
    check("keys none", r.keys(b"nomatch*"), [])
    check("type string", r.type(b"user:0001"), b"string")
    check("type hash", r.type(b"hash:1"), b"hash")
    check("type zset", r.type(b"zset:1"), b"zset")
    check("type none", r.type(b"nope"), b"none")
    check("exists multi", r.exists(b"user:0001", b"nope", b"hash:1", b"user:0001"), 3)
    check("delete", r.delete(b"user:0001", b"nope", b"hash:1"), 2)
    check("unlink", r.unlink(b"user:0002", b"zset:1"), 2)
    check("exists after delete", r.exists(b"user:0001", b"hash:1", b"user:0002", b"zset:1"), 0)
    check("dbsize after delete", r.dbsize(), 498)


def pipelines(r):
    pipe = r.pipeline(transaction=False)
    for i in range(500):
        pipe.set(f"p:{i}".encode(), str(i).encode())
    for i in range(500):
        pipe.get(f"p:{i}".encode())
    out = pipe.execute()
    check("pipeline length", len(out), 1000)
    assert all(x is True for x in out[:500]), "pipeline sets"
    check("pipeline gets", out[500:], [str(i).encode() for i in range(500)])
    # Errors inside a pipeline come back in place.
    pipe = r.pipeline(transaction=False)
    pipe.set(b"p:x", b"notnum")
    pipe.incr(b"p:x")
    pipe.get(b"p:x")
    out = pipe.execute(raise_on_error=False)
    check("pipeline error slot 0", out[0], True)
    assert isinstance(out[1], redis.ResponseError), f"pipeline error slot 1: {out[1]!r}"
    check("pipeline error slot 2", out[2], b"notnum")


def binary(r):
    key = b"bin:\x00\r\n\xff key"
    val = b"\x00\x01\r\n\r\n$5\r\n*3\x00\xfe\xff" * 10
    check("set binary", r.set(key, val), True)
    check("get binary", r.get(key), val)
    check("strlen binary", r.strlen(key), len(val))
    check("exists binary", r.exists(key), 1)
    r.hset(b"bin:h\x00", b"f\r\n\x00", b"v\x00\r\n")
    check("hgetall binary", r.hgetall(b"bin:h\x00"), {b"f\r\n\x00": b"v\x00\r\n"})
    r.zadd(b"bin:z", {b"m\x00\r\n": 1})
    check("zscore binary", r.zscore(b"bin:z", b"m\x00\r\n"), 1.0)
    check("empty value", r.set(b"bin:empty", b""), True)
    check("get empty", r.get(b"bin:empty"), b"")
    check("empty key", r.set(b"", b"empty key"), True)
    check("get empty key", r.get(b""), b"empty key")
    r.delete(b"")
    big = bytes(range(256)) * 4096  # 1 MiB
    check("set 1 MiB", r.set(b"bin:big", big), True)
    check("get 1 MiB", r.get(b"bin:big"), big)
    check("strlen 1 MiB", r.strlen(b"bin:big"), 1 << 20)


def errors(r):
    r.set(b"err:s", b"v")
    r.hset(b"err:h", b"f", b"v")
    wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value"
    expect_error(lambda: r.hget(b"err:s", b"f"), wrongtype, "hget on string")
    expect_error(lambda: r.get(b"err:h"), wrongtype, "get on hash")
    expect_error(lambda: r.zadd(b"err:h", {b"m": 1}), wrongtype, "zadd on hash")
    expect_error(lambda: r.zscore(b"err:s", b"m"), wrongtype, "zscore on string")
    expect_error(lambda: r.incr(b"err:h"), wrongtype, "incr on hash")
    msg = expect_error(
        lambda: r.execute_command("FOO", "bar", "baz"),
        "unknown command 'FOO'",
        "unknown command",
    )
    check(
        "unknown command text",
        msg,
        "unknown command 'FOO', with args beginning with: 'bar' 'baz' ",
    )
    expect_error(
        lambda: r.execute_command("GET"),
        "wrong number of arguments for 'get' command",
        "get arity",
    )
    expect_error(
        lambda: r.execute_command("HSET", "err:h", "f"),
        "wrong number of arguments for 'hset' command",
        "hset arity",
    )
    expect_error(
        lambda: r.incr(b"err:s"), "value is not an integer or out of range", "incr non-int"
    )
    expect_error(
        lambda: r.incrby(b"err:s", 1), "value is not an integer or out of range", "incrby non-int"
    )
    r.set(b"err:max", b"9223372036854775807")
    expect_error(lambda: r.incr(b"err:max"), "increment or decrement would overflow", "overflow")
    expect_error(lambda: r.set(b"err:x", b"v", ex=0), "invalid expire time in 'set' command", "ex 0")
    expect_error(lambda: r.execute_command("SET", "k", "v", "NX", "XX"), "syntax error", "nx xx")
    expect_error(
        lambda: r.execute_command("ZRANGEBYSCORE", "z", "a", "b"),
        "min or max is not a float",
        "zrangebyscore bad bounds",
    )
    # The connection is still usable after errors.
    check("after errors", r.get(b"err:s"), b"v")


def expire_limits(r):
    """Expire times that overflow 64-bit milliseconds (from now) are refused."""
    r.set(b"lim:k", b"v")
    failed = []
    for args, cmd in [
        (("SET", "lim:k", "w", "EX", "9223372036854775"), "set"),  # * 1000 + now overflows
        (("SET", "lim:k", "w", "EX", "9223372036854776"), "set"),  # * 1000 overflows
        (("SET", "lim:k", "w", "PX", "9223372036854775807"), "set"),
        (("SETEX", "lim:k", "9223372036854775", "w"), "setex"),
        (("PSETEX", "lim:k", "9223372036854775807", "w"), "psetex"),
        (("EXPIRE", "lim:k", "9223372036854775"), "expire"),
        (("PEXPIRE", "lim:k", "9223372036854775807"), "pexpire"),
    ]:
        try:
            expect_error(
                lambda: r.execute_command(*args),
                f"invalid expire time in '{cmd}' command",
                " ".join(args),
            )
            check(f"value after {' '.join(args)}", r.get(b"lim:k"), b"v")
            check(f"ttl after {' '.join(args)}", r.ttl(b"lim:k"), -1)
        except AssertionError as e:
            failed.append(str(e))
            r.set(b"lim:k", b"v")
    assert not failed, "; ".join(failed)
    # The largest absolute times are fine.
    check("pxat max", r.execute_command("SET", "lim:k", "v", "PXAT", "9223372036854775807"), True)
    assert r.ttl(b"lim:k") > 9_000_000_000_000_000, r.ttl(b"lim:k")
    assert r.pttl(b"lim:k") > 9_000_000_000_000_000_000, r.pttl(b"lim:k")


def cascade_range(r):
    r.flushdb()
    r.mset({b"r:a": b"1", b"r:b": b"2", b"r:c": b"3", b"r:d": b"4"})
    r.hset(b"r:bh", b"f", b"v")  # not a string key: not in CASCADE.RANGE
    check(
        "cascade.range",
        r.execute_command("CASCADE.RANGE", "r:b", "r:d"),
        [b"r:b", b"2", b"r:c", b"3"],
    )
    check(
        "cascade.range unbounded limit",
        r.execute_command("CASCADE.RANGE", "-", "+", "LIMIT", "3"),
        [b"r:a", b"1", b"r:b", b"2", b"r:c", b"3"],
    )
    check("cascade.range empty", r.execute_command("CASCADE.RANGE", "s", "t"), [])
    check(
        "cascade.range open end",
        r.execute_command("CASCADE.RANGE", "r:c", "+"),
        [b"r:c", b"3", b"r:d", b"4"],
    )


def flush(r):
    r.set(b"f:1", b"v")
    check("flushdb", r.flushdb(), True)
    check("dbsize after flushdb", r.dbsize(), 0)
    check("get after flushdb", r.get(b"f:1"), None)
    check("ping", r.ping(), True)
    check("echo", r.echo(b"hi\x00"), b"hi\x00")


def resp3_specific(port):
    """A connection that asked for RESP3 (HELLO 3)."""
    r = redis.Redis(port=port, protocol=3, decode_responses=False)
    r.flushdb()
    check("resp3 set", r.set(b"r3:s", b"v"), True)
    check("resp3 get", r.get(b"r3:s"), b"v")
    check("resp3 get missing", r.get(b"r3:nope"), None)
    r.hset(b"r3:h", mapping={b"a": b"1", b"b": b"2"})
    check("resp3 hgetall", r.hgetall(b"r3:h"), {b"a": b"1", b"b": b"2"})
    check("resp3 hgetall missing", r.hgetall(b"r3:nope"), {})
    r.zadd(b"r3:z", {b"m": 2.5, b"n": -1})
    check("resp3 zscore", r.zscore(b"r3:z", b"m"), 2.5)
    check("resp3 zscore missing", r.zscore(b"r3:z", b"nope"), None)
    check(
        "resp3 zrangebyscore withscores",
        [tuple(x) for x in r.zrangebyscore(b"r3:z", "-inf", "+inf", withscores=True)],
        [(b"n", -1.0), (b"m", 2.5)],
    )
    expect_error(lambda: r.hget(b"r3:s", b"f"), "WRONGTYPE", "resp3 wrongtype")
    info = r.client_info()
    check("resp3 client info resp", info.get("resp"), "3")
    # The raw HELLO reply is a map with proto 3.
    hello = r.execute_command("HELLO", "3")
    proto = hello.get(b"proto", hello.get("proto"))
    check("resp3 hello proto", proto, 3)
    r.flushdb()


def main():
    r2 = redis.Redis(port=PORT, protocol=2, decode_responses=False)
    server = r2.info("server")
    cascade = "cascade_version" in server
    clients = [("RESP2", r2)]
    default = redis.Redis(port=PORT, decode_responses=False)
    pool = default.connection_pool
    try:
        conn = pool.get_connection()
    except TypeError:  # redis-py < 6 wants a command name
        conn = pool.get_connection("PING")
    default_proto = getattr(conn, "protocol", 2)
    pool.release(conn)
    clients.append((f"default protocol ({default_proto})", default))
    steps = [strings, expiry, expire_limits, hashes, zsets, pipelines, binary, errors, flush]
    steps.append(lambda r: keyspace(r, cascade))
    if cascade:
        steps.append(cascade_range)
    # Every step runs; the failures are reported together at the end.
    failures = []
    for label, r in clients:
        for step in steps:
            r.flushdb()
            try:
                step(r)
            except AssertionError as e:
                failures.append(f"[{label}] {getattr(step, '__name__', 'keyspace')}: {e}")
    if VERSION >= (5, 0):
        try:
            resp3_specific(PORT)
        except AssertionError as e:
            failures.append(f"[RESP3] {e}")
    else:
        print(f"redis-py {redis.__version__} has no RESP3 support: skipped the RESP3 checks")
    if failures:
        print(f"redis-py {redis.__version__}: {len(failures)} failed check(s):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        sys.exit(1)
    print(f"redis-py {redis.__version__}: all checks passed (cascade={cascade})")


if __name__ == "__main__":
    main()
