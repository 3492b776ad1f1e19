#!/usr/bin/env python3
"""Kill loop against `cascade serve`: clients write, the server is SIGKILLed at a
random instant, restarted on the same directories, and every key is checked against
an oracle of acknowledged writes. Not part of CI (a soak); see README "Soaks".

Each client thread owns the keys `k:<t>:<i>` and is the only writer of them, so the
oracle per key is exact: after a crash a key must hold its last acknowledged value,
or the value of the one command that was in flight when the server died. Values
range from a few bytes to 4 KB (inline and separated). With `--slow` the store has a
slow tier under a small fast budget, so flushes, compactions, demotions, slow-tier
merges and (with `--pin-fraction`) promotions run during the kills.

With `--types` each client also owns hashes, lists, sets, sorted sets, counters and
streams (HSET/HDEL, RPUSH/LPOP, SADD/SREM, ZADD/ZREM, INCRBY, XADD * MAXLEN = 30/XDEL)
pairs of strings it sets together in MULTI/EXEC, and triples a Lua script (EVAL) writes
together (two strings and a run counter): after a crash each must hold its
acknowledged state or that state with the in-flight command applied (a stream: every
acknowledged XADD id with its entry), and the keys of a pair or triple must come from
the same transaction or script.

    python3 scripts/kill-serve.py --cycles 200 --slow --pin-fraction 0.7
    python3 scripts/kill-serve.py --cycles 100 --types
    python3 scripts/kill-serve.py --cycles 300 --durability sync

Exits non-zero on the first lost, stale or wrong value, printing the key.
"""

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Writer(threading.Thread):
    """Writes its own keys until the connection breaks."""

    def __init__(self, t, port, keys, oracle, rng, types):
        super().__init__(daemon=True)
        self.t, self.port, self.keys, self.rng = t, port, keys, rng
        self.oracle = oracle  # key -> (acked value or None, in-flight value or "")
        self.ops = 0
        self.types = types

    def value(self, key):
        n = self.rng.choice([3, 20, 100, 700, 1500, 4000])
        tag = f"{key}|{self.rng.getrandbits(40):x}|"
        return (tag * (n // len(tag) + 1))[:n] if n > len(tag) else tag

    def run(self):
        try:
            c = redis.Redis(port=self.port, socket_timeout=10)
            while True:
                i = self.rng.randrange(self.keys)
                if self.types and self.rng.random() < 0.5:
                    self.typed(c, i)
                    self.ops += 1
                    continue
                key = f"k:{self.t}:{i}"
                acked, _ = self.oracle.get(key, (None, ""))
                if self.rng.random() < 0.1:
                    self.oracle[key] = (acked, None)
                    c.delete(key)
                    self.oracle[key] = (None, "")
                else:
                    v = self.value(key)
                    self.oracle[key] = (acked, v)
                    c.set(key, v)
                    self.oracle[key] = (v, "")
                self.ops += 1
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
            return

    def typed(self, c, i):
        """One command on a key of another type; the oracle holds each key's state as
        a canonical Python value (see `read_state`)."""
        r = self.rng
        kind = r.choice("hlszcmxe")
        key = f"{kind}:{self.t}:{i % 200}"
        acked, _ = self.oracle.get(key, (EMPTY[kind], ""))
        member = f"m{r.randrange(12)}"
        if kind == "h":
            if r.random() < 0.25:
                after = tuple(sorted((f, v) for f, v in acked if f != member))
                send = lambda: c.hdel(key, member)
            else:
                v = self.value(key)[:r.choice([5, 300])]
                after = tuple(sorted([(f, x) for f, x in acked if f != member] + [(member, v)]))
                send = lambda: c.hset(key, member, v)
        elif kind == "l":
            if acked and r.random() < 0.4:
                after = acked[1:]
                send = lambda: c.lpop(key)
            else:
                v = f"{member}-{r.getrandbits(20):x}"
                after = (acked + (v,))[-40:] if len(acked) < 40 else acked
                send = (lambda: c.rpush(key, v)) if len(acked) < 40 else (lambda: c.exists(key))
        elif kind == "s":
            if r.random() < 0.3:
                after = tuple(sorted(set(acked) - {member}))
                send = lambda: c.srem(key, member)
            else:
                after = tuple(sorted(set(acked) | {member}))
                send = lambda: c.sadd(key, member)
        elif kind == "z":
            if r.random() < 0.3:
                after = tuple(sorted((m, sc) for m, sc in acked if m != member))
                send = lambda: c.zrem(key, member)
            else:
                sc = r.randrange(-1000, 1000)
                after = tuple(sorted([(m, x) for m, x in acked if m != member] + [(member, sc)]))
                send = lambda: c.zadd(key, {member: sc})
        elif kind == "x":
            if acked and r.random() < 0.2:
                victim = acked[r.randrange(len(acked))][0]
                after = tuple(e for e in acked if e[0] != victim)
                send = lambda: c.xdel(key, victim)
            else:
                # The server picks the id: "?" until the reply names it.
                v = f"{member}-{r.getrandbits(24):x}"
                after = (acked + (("?", v),))[-30:]
                send = lambda: c.xadd(key, {"f": v}, maxlen=30, approximate=False)
        elif kind == "c":
            d = r.randrange(-50, 100)
            after = acked + d
            send = lambda: c.incrby(key, d)
        elif kind == "e":
            # A Lua script: two strings and a counter, written as one engine batch.
            v = f"{key}|{r.getrandbits(40):x}"
            after = (v, v, acked[2] + 1)
            send = lambda: c.eval(SCRIPT, 3, key + ":a", key + ":b", key + ":n", v)
        else:
            # A pair of strings set together in one transaction.
            v = f"{key}|{r.getrandbits(40):x}"
            after = (v, v)
            def send():
                p = c.pipeline(transaction=True)
                p.set(key + ":a", v)
                p.set(key + ":b", v)
                p.execute()
        self.oracle[key] = (acked, after)
        res = send()
        if kind == "x" and isinstance(res, bytes):
            after = tuple((res.decode() if i == "?" else i, v) for i, v in after)
        self.oracle[key] = (after, "")


# What a never-written key of each kind reads as.
EMPTY = {"h": (), "l": (), "s": (), "z": (), "c": 0, "m": (None, None), "x": (),
         "e": (None, None, 0)}

# The script of kind "e": sets two keys to ARGV[1] and counts its runs.
SCRIPT = """redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[1])
return redis.call('incr', KEYS[3])"""


def read_state(c, key):
    """The state of a typed key as the oracle writes it."""
    kind = key[0]
    if kind == "h":
        return tuple(sorted((f.decode(), v.decode()) for f, v in c.hgetall(key).items()))
    if kind == "l":
        return tuple(v.decode() for v in c.lrange(key, 0, -1))
    if kind == "s":
        return tuple(sorted(m.decode() for m in c.smembers(key)))
    if kind == "z":
        return tuple(sorted((m.decode(), int(sc)) for m, sc in c.zrange(key, 0, -1, withscores=True)))
    if kind == "x":
        return tuple((i.decode(), d[b"f"].decode()) for i, d in c.xrange(key))
    if kind == "c":
        v = c.get(key)
        return 0 if v is None else int(v)
    if kind == "e":
        a, b, n = c.mget([key + ":a", key + ":b", key + ":n"])
        return (None if a is None else a.decode(), None if b is None else b.decode(),
                0 if n is None else int(n))
    a, b = c.mget([key + ":a", key + ":b"])
    return (None if a is None else a.decode(), None if b is None else b.decode())


def start(args, port):
    cmd = [
        args.binary, "serve", "--dir", args.dir, "--port", str(port),
        "--pool-size", args.pool_size, "--faststore-capacity", args.faststore_capacity,
        "--threads", "2",
    ]
    if args.durability:
        cmd += ["--durability", args.durability]
    if args.slow:
        cmd += ["--slow-dir", args.slow_dir, "--fast-budget", args.fast_budget,
                "--pin-fraction", str(args.pin_fraction)]
        if args.direct:
            cmd.append("--slow-direct-reads")
    log = open(os.path.join(args.work, "serve.log"), "ab")
    p = subprocess.Popen(cmd, stdout=log, stderr=log)
    deadline = time.time() + 60
    while time.time() < deadline:
        if p.poll() is not None:
            sys.exit(f"server exited with {p.returncode}; see {args.work}/serve.log")
        try:
            if redis.Redis(port=port, socket_timeout=2).ping():
                return p
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            time.sleep(0.05)
    p.kill()
    sys.exit("server did not answer within 60 s")


def pool_used_mb(port):
    info = redis.Redis(port=port, socket_timeout=10).info()
    return int(info.get("cascade_pool_bytes_used", 0)) >> 20


def matches(got, want):
    """`got == want`, where a stream entry id "?" in `want` (an XADD in flight when
    the server died: its id was never seen) matches any id."""
    if not (isinstance(want, tuple) and any(isinstance(e, tuple) and e[:1] == ("?",) for e in want)):
        return got == want
    return isinstance(got, tuple) and len(got) == len(want) and all(
        g[1] == w[1] and (w[0] == "?" or g[0] == w[0]) for g, w in zip(got, want))


def check(oracle, key, got):
    """1 if `got` is neither the key's acknowledged state nor its in-flight one."""
    acked, flight = oracle[key]
    if got == acked or (flight != "" and matches(got, flight)):
        # What the server holds is now the acknowledged state.
        oracle[key] = (got, "")
        return 0
    print(f"MISMATCH {key}: got {str(got)[:80]!r} want {str(acked)[:80]!r}"
          f" or in-flight {str(flight)[:80]!r}")
    return 1


def verify(port, oracle):
    c = redis.Redis(port=port, socket_timeout=60)
    keys = [k for k in oracle if k.startswith("k:")]
    bad = sum(check(oracle, k, read_state(c, k)) for k in oracle if not k.startswith("k:"))
    for j in range(0, len(keys), 500):
        chunk = keys[j:j + 500]
        for key, got in zip(chunk, c.mget(chunk)):
            bad += check(oracle, key, None if got is None else got.decode())
    return bad


def dir_stats(path):
    files, size = 0, 0
    for root, _, names in os.walk(path):
        for n in names:
            files += 1
            size += os.path.getsize(os.path.join(root, n))
    return files, size


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="target/release/cascade")
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--keys", type=int, default=3000, help="keys per client")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slow", action="store_true")
    ap.add_argument("--pin-fraction", type=float, default=0.0)
    ap.add_argument("--direct", action="store_true",
                    help="with --slow: gets read the slow tier with O_DIRECT")
    ap.add_argument("--pool-size", default="256M")
    ap.add_argument("--faststore-capacity", default="2M")
    ap.add_argument("--fast-budget", default="6M")
    ap.add_argument("--max-wait", type=float, default=3.0, help="most seconds between kills")
    ap.add_argument("--types", action="store_true",
                    help="also hashes, lists, sets, sorted sets, counters, streams, MULTI/EXEC pairs and Lua scripts")
    ap.add_argument("--durability", choices=["buffered", "sync"], default=None,
                    help="the server's --durability (default: the server's own)")
    ap.add_argument("--port", type=int, default=0, help="port to serve on (0: a free one)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    args.work = tempfile.mkdtemp(prefix="kill-serve-")
    args.dir = os.path.join(args.work, "data")
    args.slow_dir = os.path.join(args.work, "slow")
    oracle = {}
    port = args.port or free_port()
    total_ops = 0
    peak_used = 0
    t0 = time.time()
    for cycle in range(args.cycles):
        p = start(args, port)
        bad = verify(port, oracle)
        if bad:
            p.kill()
            sys.exit(f"cycle {cycle}: {bad} keys wrong after recovery (kept {args.work})")
        used = pool_used_mb(port)
        peak_used = max(peak_used, used)
        writers = [Writer(t, port, args.keys, oracle, random.Random(rng.getrandbits(64)),
                          args.types)
                   for t in range(args.clients)]
        for w in writers:
            w.start()
        time.sleep(rng.uniform(0.05, args.max_wait))
        p.send_signal(signal.SIGKILL)
        p.wait()
        for w in writers:
            w.join(30)
        total_ops += sum(w.ops for w in writers)
        if cycle % 10 == 0 or cycle == args.cycles - 1:
            f, _ = dir_stats(args.dir)
            sf, ss = dir_stats(args.slow_dir)
            print(f"cycle {cycle}: {total_ops} writes acknowledged, {len(oracle)} keys; "
                  f"pool in use {used} MB (peak {peak_used}), data dir {f} files, "
                  f"slow {sf} files {ss >> 20} MB; "
                  f"{time.time() - t0:.0f} s", flush=True)
    p = start(args, port)
    bad = verify(port, oracle)
    try:
        redis.Redis(port=port).shutdown()
    except redis.exceptions.ConnectionError:
        pass
    p.wait(60)
    if bad:
        sys.exit(f"final check: {bad} keys wrong (kept {args.work})")
    shutil.rmtree(args.work)
    print(f"passed: {args.cycles} kills, {total_ops} writes, every key as acknowledged")


if __name__ == "__main__":
    main()
