"""python-rq against `cascade serve`: enqueue jobs (one failing and retried, one
scheduled later), run a burst worker, and check every job finished exactly once with
its result. Usage: rq_check.py REDIS_URL"""
import os
import subprocess
import sys
import time
from datetime import timedelta

import redis
from rq import Queue, Retry

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rq_jobs  # noqa: E402

url = sys.argv[1]
r = redis.Redis.from_url(url)
r.delete("rq-check:runs", "rq-check:flaky")
q = Queue("check", connection=r)
jobs = [q.enqueue(rq_jobs.square, i) for i in range(50)]
flaky = q.enqueue(rq_jobs.flaky, retry=Retry(max=2))
later = q.enqueue_in(timedelta(seconds=1), rq_jobs.square, 1000)
time.sleep(1.5)
env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
subprocess.run(
    [sys.executable, "-m", "rq.cli", "worker", "--burst", "--with-scheduler", "--url", url, "check"],
    check=True,
    env=env,
    timeout=120,
)
# A retried job is requeued; run the worker again until it is done.
for _ in range(5):
    if flaky.get_status(refresh=True) == "finished" and later.get_status(refresh=True) == "finished":
        break
    time.sleep(1)
    subprocess.run(
        [sys.executable, "-m", "rq.cli", "worker", "--burst", "--with-scheduler", "--url", url, "check"],
        check=True,
        env=env,
        timeout=120,
    )
for i, j in enumerate(jobs):
    assert j.get_status(refresh=True) == "finished", (i, j.get_status())
    assert j.return_value() == i * i, (i, j.return_value())
assert flaky.get_status(refresh=True) == "finished", flaky.get_status()
assert later.return_value() == 1000 * 1000
runs = int(r.get("rq-check:runs") or 0)
assert runs == 51, f"square ran {runs} times, expected 51 (exactly once each)"
print("python-rq: ok (51 jobs once each, a retried job, a scheduled job)")
