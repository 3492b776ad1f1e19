"""redis-py's Lock (Lua scripts) and PubSub against `cascade serve`.
Usage: redispy_check.py REDIS_URL"""
import sys
import threading

import redis

r = redis.Redis.from_url(sys.argv[1])
lock = r.lock("check-lock", timeout=5, blocking_timeout=5)
assert lock.acquire()
other = r.lock("check-lock", timeout=5, blocking_timeout=0.2)
assert not other.acquire(), "a held lock was acquired twice"
assert lock.extend(5)
lock.release()
assert other.acquire(), "a released lock could not be taken"
other.release()
counter = {"n": 0}


def work():
    for _ in range(20):
        with r.lock("check-counter-lock", timeout=5, blocking_timeout=10):
            v = int(r.get("check-counter") or 0)
            r.set("check-counter", v + 1)


r.delete("check-counter")
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
assert int(r.get("check-counter")) == 80, r.get("check-counter")
p = r.pubsub()
p.subscribe("check-chan")
assert p.get_message(timeout=5)["type"] == "subscribe"
r.publish("check-chan", "hi")
m = p.get_message(timeout=5)
assert m["data"] == b"hi", m
print("redis-py: ok (Lock mutual exclusion over 4 threads, PubSub)")
