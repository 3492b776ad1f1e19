#!/usr/bin/env python3
"""Blocked clients against a running server (`cascade serve` or redis-server): the
order in which two parked clients are served, and the push-to-pop hand-off time.

  order N    N rounds of Redis's "BRPOPLPUSH with multiple blocked clients" without
             its waits: connection 1 sends BRPOPLPUSH blist t1 0 (t1 holds a string),
             connection 2 BRPOPLPUSH blist t2 0, connection 0 LPUSH blist foo at once.
             One loop serves them in arrival order: the first gets WRONGTYPE, the
             second the element. Prints the count of each outcome (TIMEOUT: the first
             client was still blocked after 0.5 s). Clients are kept open, so new ones
             alternate between two workers.
  handoff N  N hand-offs: a consumer parks in BLPOP, 0.2 ms later a producer on
             another connection LPUSHes; prints p50 / p99 of push sent → pop received.

Used in docs/redis-compat.md (session 20); run beside a busy loop
(`timeout 20 sh -c 'while :; do :; done' &`) to see the order under CPU contention.
  python3 scripts/blocking-order.py PORT order 300
  python3 scripts/blocking-order.py PORT handoff 3000
"""
import socket
import sys
import time
from collections import Counter


def conn(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def enc(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def reply(s, timeout=5.0):
    """One reply (simple, error, integer, bulk or a flat array of bulks), or TIMEOUT."""
    s.settimeout(timeout)
    buf = b""
    try:
        while True:
            c = s.recv(4096)
            if not c:
                return b"EOF"
            buf += c
            if buf[:1] in (b"+", b"-", b":") and buf.endswith(b"\r\n"):
                return buf
            if buf[:1] == b"$" and buf.endswith(b"\r\n") and buf.count(b"\r\n") >= 2:
                return buf
            if buf[:1] == b"*" and buf.endswith(b"\r\n"):
                n = int(buf[1:buf.index(b"\r\n")])
                if buf.count(b"\r\n") >= 1 + 2 * max(n, 0):
                    return buf
    except socket.timeout:
        return b"TIMEOUT"


def order(port, n):
    r = conn(port)
    seen = Counter()
    kept = []
    for _ in range(n):
        first, second = conn(port), conn(port)
        r.sendall(enc(b"DEL", b"blist", b"t1", b"t2"))
        reply(r)
        r.sendall(enc(b"SET", b"t1", b"nolist"))
        reply(r)
        first.sendall(enc(b"BRPOPLPUSH", b"blist", b"t1", b"0"))
        second.sendall(enc(b"BRPOPLPUSH", b"blist", b"t2", b"0"))
        r.sendall(enc(b"LPUSH", b"blist", b"foo"))
        reply(r)
        a, b = reply(first, 0.5), reply(second, 0.5)
        seen["first %s, second %s" % (a.split(b" ")[0].decode(), b.split(b"\r\n")[-2].decode())] += 1
        kept += [first, second]
    for k, v in sorted(seen.items()):
        print("%6d  %s" % (v, k))


def handoff(port, n):
    consumer, producer = conn(port), conn(port)
    lat = []
    for _ in range(n):
        consumer.sendall(enc(b"BLPOP", b"handoff", b"0"))
        time.sleep(0.0002)
        t = time.perf_counter()
        producer.sendall(enc(b"LPUSH", b"handoff", b"x"))
        reply(producer)
        reply(consumer)
        lat.append(time.perf_counter() - t)
    lat.sort()
    print("push->pop p50 %.0f us, p99 %.0f us (%d hand-offs)"
          % (lat[len(lat) // 2] * 1e6, lat[int(len(lat) * 0.99)] * 1e6, n))


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[2] not in ("order", "handoff"):
        sys.exit(__doc__)
    {"order": order, "handoff": handoff}[sys.argv[2]](int(sys.argv[1]), int(sys.argv[3]))
