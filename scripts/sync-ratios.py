#!/usr/bin/env python3
"""Ratios from `scripts/bench-sync.sh engine` output: for each thread count and
workload, every round's Mops/s of cascade, rocksdb and cascade-alt or cascade-before
(if present), the cascade ÷ rocksdb ratio per round (rounds paired in order) and
p99.9 (ms) of cascade / rocksdb / the other cascade.

    python3 scripts/sync-ratios.py OUTPUT.txt [MORE.txt ...]
"""
import collections
import sys


def main():
    rows = collections.defaultdict(list)
    for name in sys.argv[1:]:
        with open(name, encoding='utf-8') as f:
            for line in f:
                if not line.startswith(('| cascade', '| rocksdb')):
                    continue
                c = [x.strip() for x in line.strip().strip('|').split('|')]
                if len(c) < 9 or c[1] == 'workload':
                    continue
                rows[(int(c[2]), c[1], c[0])].append((float(c[4]), float(c[7])))
    for t in sorted({k[0] for k in rows}):
        for wl in ['fillrandom', 'load', 'a', 'b', 'f']:
            c, r = rows.get((t, wl, 'cascade'), []), rows.get((t, wl, 'rocksdb'), [])
            alt = rows.get((t, wl, 'cascade-alt'), []) or rows.get((t, wl, 'cascade-before'), [])
            if not c or not r:
                continue
            ratio = ' '.join(f'{x[0] / y[0]:.2f}' if y[0] else 'inf' for x, y in zip(c, r))
            fmt = lambda v: ' '.join(f'{x[0]:.3f}' for x in v)
            p = lambda v: ' '.join(f'{x[1] / 1000:.1f}' for x in v)
            print(f"| {t} | {wl} | {fmt(c)} | {fmt(r)} | {fmt(alt) or '—'} | {ratio} | "
                  f"{p(c)} / {p(r)} / {p(alt) or '—'} |")


if __name__ == '__main__':
    main()
