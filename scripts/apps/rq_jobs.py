"""Jobs for rq_check.py (imported by the rq worker)."""
from rq import get_current_job


def square(x):
    get_current_job().connection.incr("rq-check:runs")
    return x * x


def flaky():
    conn = get_current_job().connection
    if conn.incr("rq-check:flaky") < 2:
        raise RuntimeError("first attempt fails on purpose")
    return "ok"
