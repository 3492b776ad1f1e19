#!/usr/bin/env python3
"""Failover of `cascade serve` under real Redis Sentinel (issue #32 items 2 and 3).

Starts three `cascade serve` nodes (a primary and two replicas, each with a
`--config` file that CONFIG REWRITE updates) and three Sentinels (`redis-server
--sentinel`, quorum 2). It waits until every Sentinel has discovered both replicas
and the two other Sentinels, then, while a redis-py `Sentinel` client keeps writing
through `master_for(...)`, runs `--rounds` failovers: SIGKILL of the current primary,
`+switch-master` announced, the other replica following the new primary, the old
primary restarted on its directory and rejoining as a replica.

The oracle: the writer issues `SET w:<i> <i>` and, every `--wait-every` writes,
`WAIT 1 <ms>`; a write followed by a `WAIT` that answered >= 1 is *acknowledged by a
replica* and must survive every failover. After each round every acknowledged key is
read back from the new primary (any loss fails the run). Writes that were only
answered by the primary (no WAIT yet) may be lost within the replication lag: the run
counts them and reports, for the lost ones, how long before the kill they were
answered (the lag bound observed).

    python3 scripts/sentinel-failover.py --rounds 1            # what CI runs (~30 s)
    python3 scripts/sentinel-failover.py --rounds 10 --json out.json   # the kill loop

Exits 0 on success; 1 with the reason otherwise; 77 if redis-server is missing.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import redis
    from redis.sentinel import Sentinel
except ImportError:  # pragma: no cover
    print("SKIP: redis-py is not installed", file=sys.stderr)
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, secs, f):
    deadline = time.time() + secs
    last = None
    while time.time() < deadline:
        try:
            if f():
                return
        except Exception as e:  # noqa: BLE001 - a node may be restarting
            last = e
        time.sleep(0.1)
    raise SystemExit(f"FAIL: timed out waiting for {what} (last error: {last})")


class Node:
    def __init__(self, binary, work, i, port, master_port):
        self.binary, self.i, self.port = binary, i, port
        self.dir = os.path.join(work, f"node{i}")
        self.conf = os.path.join(work, f"node{i}.conf")
        os.makedirs(self.dir, exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(f"# cascade node {i}\n")
            if master_port:
                f.write(f"replicaof 127.0.0.1 {master_port}\n")
        self.log = open(os.path.join(work, f"node{i}.log"), "ab")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--dir", self.dir, "--port", str(self.port),
             "--threads", "2", "--pool-size", "256M", "--config", self.conf],
            stdout=self.log, stderr=self.log)
        wait_until(f"node {self.port} to listen", 30, lambda: self.client().ping())

    def client(self):
        return redis.Redis(port=self.port, socket_timeout=2)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class SentinelProc:
    def __init__(self, work, i, port, master_port):
        self.port = port
        self.conf = os.path.join(work, f"sentinel{i}.conf")
        with open(self.conf, "w") as f:
            f.write(f"port {port}\nbind 127.0.0.1\ndir {work}\n"
                    f"sentinel monitor m 127.0.0.1 {master_port} 2\n"
                    "sentinel down-after-milliseconds m 2000\n"
                    "sentinel failover-timeout m 6000\n"
                    "sentinel parallel-syncs m 2\n")
        self.log = open(os.path.join(work, f"sentinel{i}.log"), "ab")
        self.proc = subprocess.Popen(["redis-server", self.conf, "--sentinel"],
                                     stdout=self.log, stderr=self.log)

    def client(self):
        return redis.Redis(port=self.port, socket_timeout=2, decode_responses=True)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class Writer(threading.Thread):
    """Writes through redis-py's Sentinel client; records what was acknowledged."""

    def __init__(self, sentinel_ports, wait_every, wait_ms):
        super().__init__(daemon=True)
        self.sentinel = Sentinel([("127.0.0.1", p) for p in sentinel_ports],
                                 socket_timeout=0.5)
        self.wait_every, self.wait_ms = wait_every, wait_ms
        self.stop_flag = False
        self.lock = threading.Lock()
        self.answered = {}      # i -> time the primary answered SET
        self.acked_upto = 0     # every i <= this was followed by WAIT >= 1
        self.ok = self.errors = self.waits_short = 0
        self.last_ok = time.time()
        self.max_gap = 0.0

    def run(self):
        m = self.sentinel.master_for("m", socket_timeout=0.5, retry_on_timeout=False)
        i = 0
        pending = []
        while not self.stop_flag:
            i += 1
            try:
                m.set(f"w:{i}", i)
                now = time.time()
                with self.lock:
                    self.answered[i] = now
                    self.ok += 1
                    self.max_gap = max(self.max_gap, now - self.last_ok)
                    self.last_ok = now
                pending.append(i)
                if len(pending) >= self.wait_every:
                    n = m.execute_command("WAIT", 1, self.wait_ms)
                    if n >= 1:
                        with self.lock:
                            self.acked_upto = max(self.acked_upto, pending[-1])
                    else:
                        with self.lock:
                            self.waits_short += 1
                    pending = []
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError,
                    redis.ResponseError) as e:
                with self.lock:
                    self.errors += 1
                # A write whose reply was lost is not answered: it is not counted.
                pending = []
                time.sleep(0.05)
                _ = e
            time.sleep(0.002)


class Prober(threading.Thread):
    """PINGs every node every 20 ms: the longest answer time seen (a stall shows)."""

    def __init__(self, ports):
        super().__init__(daemon=True)
        self.ports, self.stop_flag, self.max_ms = ports, False, {p: 0.0 for p in ports}

    def run(self):
        from redis.backoff import NoBackoff
        from redis.retry import Retry
        # No retries: a retried PING would time the retries' backoff, not the server.
        conns = {p: redis.Redis(port=p, socket_timeout=3, retry=Retry(NoBackoff(), 0))
                 for p in self.ports}
        while not self.stop_flag:
            for p, c in conns.items():
                t = time.time()
                try:
                    c.ping()
                except Exception:  # noqa: BLE001 - killed or restarting
                    continue
                ms = (time.time() - t) * 1000
                self.max_ms[p] = max(self.max_ms[p], ms)
                if ms > 200 and os.environ.get("PROBE_VERBOSE"):
                    print(f"slow PING {p}: {ms:.0f} ms at {time.strftime('%H:%M:%S')}"
                          f".{int(t * 1000) % 1000:03d}", flush=True)
            time.sleep(0.02)


def role(port):
    return redis.Redis(port=port, socket_timeout=1, decode_responses=True).execute_command("ROLE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "cascade"))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--wait-every", type=int, default=10)
    ap.add_argument("--wait-ms", type=int, default=1000)
    ap.add_argument("--base-port", type=int, default=0,
                    help="nodes on BASE..BASE+2, Sentinels on BASE+10..BASE+12 (0: free ports)")
    ap.add_argument("--json", help="write the measurements here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    if not shutil.which("redis-server"):
        print("SKIP: redis-server is not installed", file=sys.stderr)
        return 77
    work = tempfile.mkdtemp(prefix="cascade-sentinel-")
    t_start = time.time()
    pick = (lambda k: a.base_port + k) if a.base_port else (lambda k: free_port())
    ports = [pick(k) for k in range(3)]
    nodes = [Node(a.bin, work, 0, ports[0], None)]
    nodes += [Node(a.bin, work, i, ports[i], ports[0]) for i in (1, 2)]
    sentinels = []
    writer = None
    result = {"rounds": []}
    try:
        for n in nodes:
            n.start()
        for n in nodes[1:]:
            wait_until(f"replica {n.port} to sync", 30,
                       lambda n=n: role(n.port)[3] == "connected")
        sentinels = [SentinelProc(work, i, pick(10 + i), ports[0]) for i in range(3)]

        def discovered():
            for s in sentinels:
                mi = s.client().execute_command("SENTINEL", "MASTER", "m")
                d = dict(zip(mi[::2], mi[1::2])) if isinstance(mi, list) else mi
                if int(d["num-slaves"]) != 2 or int(d["num-other-sentinels"]) != 2:
                    return False
            return True
        wait_until("the Sentinels to discover both replicas and each other", 40, discovered)
        print(f"discovered after {time.time() - t_start:.1f} s", flush=True)

        events = sentinels[0].client().pubsub()
        events.subscribe("+switch-master")
        writer = Writer([s.port for s in sentinels], a.wait_every, a.wait_ms)
        writer.start()
        prober = Prober(ports)
        prober.start()
        wait_until("the writer to start", 10, lambda: writer.ok > 50)
        by_port = {n.port: n for n in nodes}
        for r in range(a.rounds):
            addr = sentinels[0].client().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m")
            old = by_port[int(addr[1])]
            time.sleep(0.5)
            with writer.lock:
                acked_before = writer.acked_upto
            t_kill = time.time()
            old.kill()
            switched = []

            def switch():
                msg = events.get_message(timeout=0.2)
                if msg and msg["type"] == "message":
                    switched.append((time.time(), msg["data"]))
                return bool(switched)
            wait_until("+switch-master", 40, switch)
            t_switch, data = switched[0]
            new_port = int(data.split()[4])
            assert new_port != old.port, data
            other = [n for n in nodes if n.port not in (old.port, new_port)][0]
            wait_until("the new primary to report role master", 15,
                       lambda: role(new_port)[0] == "master")
            wait_until("the other replica to follow the new primary", 30,
                       lambda: role(other.port)[:2] == ["slave", "127.0.0.1"]
                       and int(role(other.port)[2]) == new_port
                       and role(other.port)[3] == "connected")
            t_follow = time.time()
            old.start()
            wait_until("the old primary to rejoin as a replica", 40,
                       lambda: role(old.port)[0] == "slave"
                       and int(role(old.port)[2]) == new_port
                       and role(old.port)[3] == "connected")
            t_rejoin = time.time()
            wait_until("the writer to write through the new primary", 20,
                       lambda: time.time() - writer.last_ok < 0.5)
            # The oracle on the new primary.
            p = redis.Redis(port=new_port, socket_timeout=5)
            with writer.lock:
                answered = dict(writer.answered)
            acked = [i for i in answered if i <= acked_before]
            vals = p.mget([f"w:{i}" for i in acked]) if acked else []
            lost_acked = [i for i, v in zip(acked, vals) if v is None or int(v) != i]
            before_kill = [i for i, t in answered.items() if t <= t_kill and i > acked_before]
            vals = p.mget([f"w:{i}" for i in before_kill]) if before_kill else []
            lost = [i for i, v in zip(before_kill, vals) if v is None]
            lag_ms = max((t_kill - answered[i]) * 1000 for i in lost) if lost else 0.0
            rd = {
                "round": r + 1, "killed": old.port, "promoted": new_port,
                "switch_s": round(t_switch - t_kill, 2),
                "other_follows_s": round(t_follow - t_kill, 2),
                "old_rejoins_s": round(t_rejoin - t_kill, 2),
                "acked_checked": len(acked), "acked_lost": len(lost_acked),
                "unacked_checked": len(before_kill), "unacked_lost": len(lost),
                "unacked_lost_max_age_ms": round(lag_ms, 1),
            }
            result["rounds"].append(rd)
            print(json.dumps(rd), flush=True)
            if lost_acked:
                raise SystemExit(f"FAIL: writes acknowledged by WAIT were lost: {lost_acked[:10]}")
        writer.stop_flag = True
        writer.join(5)
        result.update({
            "writes_ok": writer.ok, "write_errors": writer.errors,
            "waits_short": writer.waits_short, "max_write_gap_s": round(writer.max_gap, 2),
            "total_s": round(time.time() - t_start, 1),
            "max_ping_ms": {str(k): round(v, 1) for k, v in prober.max_ms.items()},
        })
        print(json.dumps({k: v for k, v in result.items() if k != "rounds"}), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=1)
        print("OK: every failover promoted a replica, the others followed, nothing "
              "acknowledged by WAIT was lost")
        return 0
    finally:
        if writer:
            writer.stop_flag = True
        for s in sentinels:
            s.stop()
        for n in nodes:
            n.stop()
        if a.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
