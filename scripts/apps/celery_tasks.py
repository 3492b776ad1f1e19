"""Tasks for celery_check.py (imported by the worker)."""
import os

import redis
from celery import Celery

URL = os.environ["CASCADE_URL"]
app = Celery("celery_tasks", broker=URL, backend=URL)
app.conf.broker_connection_retry_on_startup = True


@app.task
def add(x, y):
    return x + y


@app.task(bind=True, max_retries=3, default_retry_delay=0.2)
def flaky(self):
    if redis.Redis.from_url(URL).incr("celery-check:flaky") < 2:
        raise self.retry(exc=RuntimeError("first attempt fails on purpose"))
    return "ok"
