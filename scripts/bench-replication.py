#!/usr/bin/env python3
"""Throughput cost of replicas and replication lag (issue #32 item 3), for
`cascade serve` beside redis-server with the same replicas.

For each server kind and 0, 1 and 2 replicas (all on this machine, 127.0.0.1): starts
the primary and the replicas, waits until they are in sync, then runs

    redis-benchmark -p PRIMARY -t set,get -n N -r 1000000 -d 100 -P 16 -c 50 --csv

and, during a second SET load (same flags, `-t set` only), measures the replication
lag: every 20 ms a marker `SET lag:m <seq>` goes to the primary and the first replica
is polled (every 0.2 ms) until it returns that value; the time from the primary's
reply to the replica's answer is one lag sample. It also records the largest byte
distance between the primary's `master_repl_offset` and the replica's acknowledged
offset seen during the load. Prints a Markdown table.

    python3 scripts/bench-replication.py --base-port 7460 -n 200000
"""

import argparse
import csv
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wait_until(what, secs, f):
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            if f():
                return
        except Exception:  # noqa: BLE001 - starting
            pass
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def start(kind, binary, work, port, master):
    d = os.path.join(work, f"{kind}-{port}")
    os.makedirs(d, exist_ok=True)
    log = open(os.path.join(work, f"{kind}-{port}.log"), "ab")
    if kind == "cascade":
        cmd = [binary, "serve", "--dir", d, "--port", str(port), "--threads", "2",
               "--pool-size", "1G"]
        if master:
            cmd += ["--replicaof", "127.0.0.1", str(master)]
    else:
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
               "--save", "", "--appendonly", "no"]
        if master:
            cmd += ["--replicaof", "127.0.0.1", str(master)]
    p = subprocess.Popen(cmd, stdout=log, stderr=log)
    wait_until(f"{kind} on {port}", 30, lambda: redis.Redis(port=port).ping())
    return p


def info(port, field):
    r = redis.Redis(port=port, decode_responses=True).info("replication")
    return r.get(field)


def bench(port, tests, n):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", tests, "-n", str(n), "-r", "1000000",
         "-d", "100", "-P", "16", "-c", "50", "--csv"],
        check=True, capture_output=True, text=True).stdout
    rows = list(csv.reader(io.StringIO(out)))
    return {r[0]: (float(r[1]), float(r[5])) for r in rows[1:]}  # rps, p50 ms


def lag(primary, replica, stop, samples, offsets):
    p = redis.Redis(port=primary)
    r = redis.Redis(port=replica)
    seq = 0
    while not stop.is_set():
        seq += 1
        v = str(seq).encode()
        p.set("lag:m", v)
        t0 = time.perf_counter()
        while r.get("lag:m") != v:
            if time.perf_counter() - t0 > 10:
                break
            time.sleep(0.0002)
        samples.append((time.perf_counter() - t0) * 1000)
        try:
            pi = p.info("replication")
            acked = min(int(v2.get("offset", 0)) for k2, v2 in pi.items()
                        if k2.startswith("slave") and isinstance(v2, dict))
            offsets.append(int(pi["master_repl_offset"]) - acked)
        except (ValueError, KeyError):
            pass
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "cascade"))
    ap.add_argument("--base-port", type=int, default=7460)
    ap.add_argument("-n", type=int, default=200000)
    ap.add_argument("--kinds", default="cascade,redis")
    a = ap.parse_args()
    rows = []
    for kind in a.kinds.split(","):
        for nrep in (0, 1, 2):
            work = tempfile.mkdtemp(prefix="cascade-bench-repl-")
            procs = []
            try:
                pport = a.base_port
                procs.append(start(kind, a.bin, work, pport, None))
                for i in range(nrep):
                    procs.append(start(kind, a.bin, work, pport + 1 + i, pport))
                wait_until("replicas online", 30,
                           lambda: int(info(pport, "connected_slaves")) == nrep)
                res = bench(pport, "set,get", a.n)
                row = {"kind": kind, "replicas": nrep,
                       "set": res.get("SET"), "get": res.get("GET")}
                if nrep:
                    # At rest: 100 markers with nothing else running.
                    rest, _ = [], []
                    stop = threading.Event()
                    t = threading.Thread(target=lag, args=(pport, pport + 1, stop, rest, _))
                    t.start()
                    wait_until("100 lag samples at rest", 60, lambda: len(rest) >= 100)
                    stop.set()
                    t.join()
                    rest.sort()
                    row["lag_rest"] = (statistics.median(rest), rest[int(len(rest) * 0.99) - 1],
                                       rest[-1], len(rest))
                    stop, samples, offsets = threading.Event(), [], []
                    t = threading.Thread(target=lag, args=(pport, pport + 1, stop, samples, offsets))
                    t.start()
                    res2 = bench(pport, "set", a.n)
                    stop.set()
                    t.join()
                    samples.sort()
                    row["lag"] = (statistics.median(samples),
                                  samples[int(len(samples) * 0.99) - 1] if len(samples) > 1 else samples[-1],
                                  samples[-1], len(samples))
                    row["offset_gap"] = max(offsets) if offsets else 0
                    row["set_during_lag"] = res2.get("SET")
                rows.append(row)
                print(row, flush=True)
            finally:
                for p in procs:
                    p.terminate()
                for p in procs:
                    p.wait(30)
                shutil.rmtree(work, ignore_errors=True)
    print()
    print("| server | replicas | SET ops/s | SET p50 ms | GET ops/s | GET p50 ms | lag at rest p50 / p99 / max ms | lag under SET load p50 / p99 / max ms (samples) | SET ops/s during it | max offset gap B |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lagtxt = resttxt = during = "—"
        if "lag" in r:
            l50, l99, lmax, n = r["lag"]
            lagtxt = f"{l50:.2f} / {l99:.2f} / {lmax:.2f} ({n})"
            l50, l99, lmax, n = r["lag_rest"]
            resttxt = f"{l50:.2f} / {l99:.2f} / {lmax:.2f}"
            during = f"{r['set_during_lag'][0]:,.0f}"
        print(f"| {r['kind']} | {r['replicas']} | {r['set'][0]:,.0f} | {r['set'][1]:.3f} | "
              f"{r['get'][0]:,.0f} | {r['get'][1]:.3f} | {resttxt} | {lagtxt} | {during} | "
              f"{r.get('offset_gap', '—')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
