"""Span metrics (distributed.span, Span.cumulative_worker_metrics) from a
stock Client and stock workers, read the way users read them: through
run_on_scheduler on dask_scheduler.extensions["spans"]. The same block runs
on distributed's own scheduler and the two are compared."""

from __future__ import annotations

import time

import pytest
from distributed import Client, span

from cluster import GoScheduler, PyScheduler, Workers

pytestmark = pytest.mark.timeout(300)


def busy(x, seconds=0.05):
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:
        pass
    return x + 1


def read_span(dask_scheduler, span_id):
    ext = dask_scheduler.extensions["spans"]
    sp = ext.spans[span_id]
    return {
        "name": sp.name,
        "parent": sp.parent.name if sp.parent else None,
        "children": [c.name for c in sp.children],
        "metrics": dict(sp.cumulative_worker_metrics),
        "by_tag": [s.id for s in ext.find_by_tags("outer")],
    }


def run(kind: str, tmp) -> tuple[dict, dict]:
    tmp.mkdir()
    sched = (PyScheduler if kind == "py" else GoScheduler)(tmp)
    workers = Workers(tmp)
    try:
        sched.start()
        for name in ("w0", "w1"):
            workers.start(sched.address, name)
        with Client(sched.address, timeout=60) as c:
            c.wait_for_workers(2, timeout=120)
            with span("outer") as outer:
                with span("inner") as inner:
                    assert c.gather(c.map(busy, range(20), key=[f"busy-{i}" for i in range(20)])) == list(range(1, 21))
            deadline = time.monotonic() + 30
            while True:  # the metrics come with the workers' next heartbeats
                got = c.run_on_scheduler(read_span, span_id=inner)
                cpu = got["metrics"].get(("execute", "busy", "thread-cpu", "seconds"), 0)
                if cpu >= 0.9 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            return got, c.run_on_scheduler(read_span, span_id=outer)
    finally:
        workers.stop()
        sched.stop()


def test_span_metrics_match_pythons(tmp_path):
    """A nested span around 20 tasks of 50 ms of CPU each: the inner span's
    cumulative worker metrics hold their thread CPU (about 1 s), the outer
    span sums its child's, the tree and find_by_tags answer as on
    distributed's scheduler, and the metric keys are the same."""
    got = {kind: run(kind, tmp_path / kind) for kind in ("py", "go")}
    for kind, (inner, outer) in got.items():
        assert inner["name"] == ("outer", "inner") and inner["parent"] == ("outer",), (kind, inner)
        assert outer["children"] == [("outer", "inner")], (kind, outer)
        cpu = inner["metrics"].get(("execute", "busy", "thread-cpu", "seconds"), 0)
        assert 0.9 <= cpu < 3, (kind, cpu, inner["metrics"])
        assert outer["metrics"][("execute", "busy", "thread-cpu", "seconds")] == pytest.approx(cpu), kind
        assert len(outer["by_tag"]) == 1, (kind, outer["by_tag"])
    py_keys = {k for k in got["py"][0]["metrics"] if k[0] == "execute" and k[1] == "busy"}
    go_keys = {k for k in got["go"][0]["metrics"] if k[0] == "execute" and k[1] == "busy"}
    assert go_keys == py_keys, (go_keys ^ py_keys)
