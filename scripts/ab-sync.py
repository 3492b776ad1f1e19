#!/usr/bin/env python3
"""Alternating A/B of engine settings for durable writes, one binary, one sitting.

Runs `cascade bench --durability sync` on the real disk for each configuration in
turn (order reversed every other round, so drift of a shared host hits every
configuration alike) and prints, per thread count and configuration, the median
Mops/s (with min and max) and the median p50 / p99 / p99.9 latency over the rounds.

    python3 scripts/ab-sync.py ROUNDS THREADS... -- LABEL=VAR:VALUE,VAR:VALUE ...

e.g. `python3 scripts/ab-sync.py 5 1 8 32 -- shared=CASCADE_JOURNAL_SYNC:shared
dsync=CASCADE_JOURNAL_SYNC:dsync msync=CASCADE_JOURNAL:0`. Environment: BIN (default
target/release/cascade), AB_DIR (default target/bench-ab, must be on the disk to
measure), AB_ARGS (default `--workloads fillrandom --value-size 100`; fillrandom runs
3,000 operations per thread, at most 60,000, anything else `--num 20000`).
Not part of CI (docs/benchmarks.md, session 12).
"""
import os
import statistics
import subprocess
import sys


def main():
    if '--' not in sys.argv:
        sys.exit(__doc__)
    i = sys.argv.index('--')
    rounds = int(sys.argv[1])
    threads = [int(t) for t in sys.argv[2:i]]
    configs = [c.split('=', 1) for c in sys.argv[i + 1:]]
    binary = os.environ.get('BIN', 'target/release/cascade')
    base = os.environ.get('AB_DIR', 'target/bench-ab')
    extra = os.environ.get('AB_ARGS', '--workloads fillrandom --value-size 100').split()
    res = {}
    for t in threads:
        n = min(t * 3000, 60000) if 'fillrandom' in extra else 20000
        for r in range(rounds):
            order = configs if r % 2 == 0 else list(reversed(configs))
            for label, env in order:
                e = dict(os.environ)
                for kv in filter(None, env.split(',')):
                    k, v = kv.split(':', 1)
                    e[k] = v
                cmd = [binary, 'bench', '--quiet', '--dir', base, '--durability', 'sync',
                       '--pool-size', '2G', '--num', str(n), '--threads', str(t)] + extra
                out = subprocess.run(cmd, env=e, capture_output=True, text=True, check=True).stdout
                for line in out.splitlines():
                    if line.startswith('| cascade'):
                        f = [x.strip() for x in line.split('|')]
                        res.setdefault((t, label, f[2]), []).append(
                            (float(f[5]), float(f[7]), float(f[8]), float(f[9])))
    for (t, label, w), v in sorted(res.items()):
        med = [statistics.median(x[k] for x in v) for k in range(4)]
        print(f"{w:10} t={t:2} {label:14} Mops/s med {med[0]:.4f} (min {min(x[0] for x in v):.4f} "
              f"max {max(x[0] for x in v):.4f})  p50 {med[1]:7.1f}  p99 {med[2]:8.1f}  "
              f"p99.9 {med[3]:9.1f} µs  n={len(v)}")


if __name__ == '__main__':
    main()
