"""Client.story(key) from a stock Client: distributed's story records of a
task's transitions on the scheduler (key, start, finish, recommendations,
stimulus_id, timestamp), and, ours, each placement's worker, rule and
reason as a seventh element. Checked for a plain task, a root withheld in
the queue, a root placed by co-assignment and a task moved by stealing."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest
from distributed import Client

from cluster import GoScheduler, Workers, scheduler_workers

pytestmark = pytest.mark.timeout(240)


def inc(x):
    return x + 1


def slow(i):
    time.sleep(0.5)
    return i


def scheduler_story(c: Client, key) -> list[tuple]:
    """The scheduler's records of key: ("scheduler", key, start, finish,
    recommendations, stimulus_id, timestamp, placed)."""
    story = [r for r in c.story(key) if r[0] == "scheduler"]
    assert story, f"no scheduler record for {key}: {c.story(key)}"
    for r in story:
        assert len(r) == 8, r
        _, k, start, finish, recs, sid, ts, placed = r
        assert isinstance(start, str) and isinstance(finish, str) and isinstance(sid, str), r
        assert isinstance(ts, float) and ts > 1e9, r
        assert placed is None or {"worker", "rule", "reason"} <= set(placed), r
    return story


def placements(story: list[tuple]) -> list[dict]:
    return [r[7] for r in story if r[7] is not None]


@contextmanager
def cluster(tmp_path, config: str, n_workers: int, nthreads: int = 1):
    """The Go scheduler with config (distributed.scheduler's keys) and
    n_workers stock workers, w0...; yields (scheduler, workers) and stops
    them all on exit, also when one never gets ready."""
    cfg = tmp_path / "dask.yaml"
    cfg.write_text("distributed:\n  scheduler:\n" + config)
    sched = GoScheduler(tmp_path, "--config", str(cfg))
    workers = Workers(tmp_path)
    try:
        sched.start()
        for i in range(n_workers):
            workers.start(sched.address, f"w{i}", nthreads=nthreads)
        yield sched, workers
    finally:
        workers.stop()
        sched.stop()


def test_story_of_a_plain_task(tmp_path):
    with cluster(tmp_path, "    worker-saturation: 1.1\n", 2) as (sched, workers):
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
            fut = c.submit(inc, 1)
            assert fut.result() == 2
            story = scheduler_story(c, fut.key)
            steps = [(r[2], r[3]) for r in story]
            assert ("released", "waiting") in steps and ("processing", "memory") in steps, steps
            (placed,) = [r[7] for r in story if r[3] == "processing"]
            assert placed["worker"] in scheduler_workers(c), placed
            assert placed["rule"] == "idle" and "no dependencies" in placed["reason"], placed


def test_story_of_a_queued_root(tmp_path):
    # one worker, one thread, saturation 1.0: one slot; the rest of the
    # 12 roots wait in the queue
    with cluster(tmp_path, "    worker-saturation: 1.0\n", 1) as (sched, workers):
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(1, timeout=60)
            futs = c.map(inc, range(12), pure=False)
            assert c.gather(futs) == [i + 1 for i in range(12)]
            story = scheduler_story(c, futs[-1].key)
            rules = [p["rule"] for p in placements(story)]
            assert "queued" in rules and "free-slot" in rules, story
            assert rules.index("queued") < rules.index("free-slot"), rules
            assert ("waiting", "queued") in [(r[2], r[3]) for r in story], story
            queued = next(p for p in placements(story) if p["rule"] == "queued")
            assert "no running worker has a free slot" in queued["reason"], queued


def test_story_of_a_co_assigned_root(tmp_path):
    import dask.array as da
    from distributed import get_task_stream

    with cluster(tmp_path, "    worker-saturation: 1.0\n    root-task-co-assignment: true\n", 2) as (sched, workers):
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
            with get_task_stream(c) as ts:
                fut = c.compute(da.ones((64, 4), chunks=(4, 4)).sum())
                assert fut.result() == 256
            keys = {tuple(r["key"]) if isinstance(r["key"], list) else r["key"] for r in ts.data}
            assert len(keys) > 16, keys
            story = [r for r in c.story(*keys) if r[0] == "scheduler"]
            fams = [r[7] for r in story if r[7] is not None and r[7]["rule"] == "co-family"]
            assert fams, [r[7] for r in story]
            assert all("co-assignment" in p["reason"] and p["worker"] for p in fams), fams


def test_story_of_a_stolen_task(tmp_path):
    # withholding off: all 30 tasks of 0.5 s go to the only worker; a
    # second one joins and work stealing moves some over
    with cluster(tmp_path, "    worker-saturation: inf\n    work-stealing: true\n", 1) as (sched, workers):
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(1, timeout=60)
            futs = c.map(slow, range(30), pure=False)
            time.sleep(1)
            workers.start(sched.address, "w-late", nthreads=1)
            assert c.gather(futs) == list(range(30))
            stolen = []
            for f in futs:
                for p in placements(scheduler_story(c, f.key)):
                    if p["rule"] == "stolen":
                        stolen.append(p)
            assert stolen, "no task was stolen: the test proves nothing (see the stealing counters)"
            late = [a for a, w in scheduler_workers(c).items() if w["name"] == "w-late"]
            assert all(p["worker"] == late[0] for p in stolen), stolen
            assert all("stolen from" in p["reason"] and "occupancy" in p["reason"] for p in stolen), stolen
