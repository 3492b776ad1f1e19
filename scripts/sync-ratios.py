#!/usr/bin/env python3
"""Ratios from `scripts/bench-sync.sh engine` output: for each thread count and
workload, every round's Mops/s of cascade, rocksdb and cascade-alt or cascade-before
(if present), the cascade ÷ rocksdb ratio per round (rounds paired in order) and
p99.9 (ms) of cascade / rocksdb / the other cascade.

From `scripts/bench-sync.sh server` output: per test, every round's ops/s of each
server, the ratio of each to redis (rounds paired in order) and p99.9 ÷ redis's.

    python3 scripts/sync-ratios.py OUTPUT.txt [MORE.txt ...]
"""
import collections
import sys


def server(names):
    rows = collections.defaultdict(list)
    order = []
    for name in names:
        with open(name, encoding='utf-8') as f:
            for line in f:
                c = [x.strip() for x in line.strip().strip('|').split('|')]
                if len(c) < 8 or c[1] not in ('SET', 'INCR', 'LPUSH', 'ycsb-a', 'ycsb-b'):
                    continue
                ms = 1.0 if c[5].endswith('ms') else 0.001
                rows[(c[1], c[0])].append((float(c[2]), float(c[5].split()[0]) * ms))
                if c[0] not in order:
                    order.append(c[0])
    print('| test | server | ops/s per round | ÷ redis | p99.9 ms | p99.9 ÷ redis |')
    print('|---|---|---|---|---|---|')
    for t in ('SET', 'INCR', 'LPUSH', 'ycsb-a', 'ycsb-b'):
        r = rows.get((t, 'redis'), [])
        for srv in order:
            v = rows.get((t, srv), [])
            if not v or not r:
                continue
            ratio = ' '.join(f'{x[0] / y[0]:.2f}' for x, y in zip(v, r))
            p = ' '.join(f'{x[1]:.2f}' for x in v)
            pr = ' '.join(f'{x[1] / y[1]:.1f}' if y[1] else 'inf' for x, y in zip(v, r))
            ops = ' '.join(f'{x[0]:.0f}' for x in v)
            print(f'| {t} | {srv} | {ops} | {ratio} | {p} | {pr} |')


def main():
    if any('### server' in open(n, encoding='utf-8').read() for n in sys.argv[1:]):
        server(sys.argv[1:])
        return
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
