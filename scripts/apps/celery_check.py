"""Celery with the Redis broker and result backend against `cascade serve`: a worker
(solo pool, in a subprocess) runs tasks sent by this process, including a retried task
and a countdown; every result comes back. Usage: celery_check.py REDIS_URL"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["CASCADE_URL"] = sys.argv[1]
import celery_tasks  # noqa: E402

env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
worker = subprocess.Popen(
    [sys.executable, "-m", "celery", "-A", "celery_tasks", "worker", "--pool", "solo",
     "--concurrency", "1", "--loglevel", "WARNING", "--without-gossip", "--without-mingle"],
    env=env,
)
try:
    adds = [celery_tasks.add.delay(i, i) for i in range(30)]
    retried = celery_tasks.flaky.delay()
    later = celery_tasks.add.apply_async((20, 22), countdown=1)
    for i, res in enumerate(adds):
        assert res.get(timeout=60) == 2 * i, i
    assert retried.get(timeout=60) == "ok"
    assert later.get(timeout=60) == 42
    print("celery: ok (30 tasks, a retried task, a countdown task; Redis broker and results)")
finally:
    worker.terminate()
    worker.wait(timeout=30)
