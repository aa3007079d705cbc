"""Work stealing with stock workers: a backlog placed on the only worker
there was is spread over the workers that join later, through the
steal-request / steal-response exchange with stock `dask worker`s.

The scenario: withholding off (worker-saturation inf, so all
80 tasks of 0.5 s go to the first worker at once), three more workers join
about a second later. Without stealing they get nothing and the graph takes
the 40 s one worker needs; with stealing every worker runs a share.
"""

from __future__ import annotations

import time

import pytest
from distributed import Client, get_task_stream, get_worker

from cluster import GoScheduler, Workers

pytestmark = pytest.mark.timeout(240)

N_TASKS = 80
DURATION = 0.5


def slow(i):
    time.sleep(DURATION)
    return get_worker().name


def run_backlog(tmp_path, stealing: bool):
    """Runs the scenario; returns (wall seconds, {worker name: tasks run},
    task-stream records, scheduler_info()["stealing"])."""
    cfg = tmp_path / "dask.yaml"
    cfg.write_text(
        "distributed:\n  scheduler:\n"
        "    worker-saturation: inf\n"
        f"    work-stealing: {'true' if stealing else 'false'}\n"
    )
    sched = GoScheduler(tmp_path, "--config", str(cfg))
    workers = Workers(tmp_path)
    try:
        sched.start()
        workers.start(sched.address, "w0", nthreads=1)
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(1, timeout=60)
            with get_task_stream(c) as stream:
                start = time.monotonic()
                futs = c.map(slow, range(N_TASKS), pure=False)
                time.sleep(1)
                for i in (1, 2, 3):
                    workers.start(sched.address, f"w{i}", nthreads=1)
                names = c.gather(futs)
                wall = time.monotonic() - start
            info = c.scheduler_info()["stealing"]
        per_worker: dict[str, int] = {}
        for n in names:
            per_worker[n] = per_worker.get(n, 0) + 1
        print(f"stealing={stealing}: wall {wall:.1f} s, tasks per worker {dict(sorted(per_worker.items()))}, "
              f"stealing counters {dict((k, v) for k, v in info.items() if not k.startswith('request_'))}")
        return wall, per_worker, stream.data, info
    except BaseException:
        print(sched.logs()[-4000:])
        print(workers.logs())
        raise
    finally:
        workers.stop()
        sched.stop()


def test_backlog_spreads_to_late_workers(tmp_path):
    wall, per_worker, records, info = run_backlog(tmp_path, stealing=True)
    assert info["enabled"] is True
    assert info["confirmed"] > 0, info
    assert info["in_flight"] == 0, info
    # every worker got a share of the backlog...
    assert set(per_worker) == {"w0", "w1", "w2", "w3"}, per_worker
    assert min(per_worker.values()) >= 5, per_worker
    # ...and each task ran exactly once: a stolen task was given up by its
    # victim before the thief ran it
    ran = [r["key"] for r in records if r.get("status") == "OK"]
    assert len(ran) == len(set(ran)) == N_TASKS
    # one worker alone needs N_TASKS * DURATION = 40 s
    assert wall < 0.6 * N_TASKS * DURATION, wall


def test_without_stealing_late_workers_stay_idle(tmp_path):
    """The contrast (work-stealing: false): the backlog stays where it was
    placed, as it did before stealing existed."""
    wall, per_worker, _, info = run_backlog(tmp_path, stealing=False)
    assert info["enabled"] is False and info["requests"] == 0, info
    assert per_worker == {"w0": N_TASKS}, per_worker
    assert wall >= N_TASKS * DURATION, wall
