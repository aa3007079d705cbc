"""Root-task withholding and co-assignment, switched by a dask config file
(--config), with stock workers: the workers' own state shows how many root
tasks they hold; results are checked in all three modes; bad values stop the
scheduler at start-up."""

from __future__ import annotations

import subprocess
import time

import pytest
from dask import delayed
from distributed import Client

from cluster import BINARY, GoScheduler, Workers, build_binary, python_env

pytestmark = pytest.mark.timeout(120)

N_ROOTS = 32
HELD_STATES = ("ready", "executing", "constrained", "waiting", "long-running")


def slowroot(i):
    time.sleep(0.08)
    return i * i


def add(a, b):
    return a + b


def tree_sum(xs):
    while len(xs) > 1:
        xs = [delayed(add)(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
    return xs[0]


def roots_held(dask_worker):
    """Root tasks this worker holds to run (queued on it or running)."""
    return sum(
        1
        for ts in dask_worker.state.tasks.values()
        if str(ts.key).startswith("slowroot") and ts.state in HELD_STATES
    )


MODES = {
    "off": "worker-saturation: inf\n",
    "withholding": "worker-saturation: 1.0\n",
    "coassign": "worker-saturation: 1.0\n    root-task-co-assignment: true\n",
}


@pytest.mark.parametrize("mode", list(MODES))
def test_slot_limit_and_results(tmp_path, mode):
    cfg = tmp_path / "dask.yaml"
    cfg.write_text("distributed:\n  scheduler:\n    " + MODES[mode])
    sched = GoScheduler(tmp_path, "--config", str(cfg))
    workers = Workers(tmp_path)
    try:
        sched.start()
        workers.start(sched.address, "w1", nthreads=1)
        workers.start(sched.address, "w2", nthreads=1)
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
            info = c.scheduler_info()["config"]
            want_sat = "inf" if mode == "off" else 1.0
            assert info["distributed.scheduler.worker-saturation"] == want_sat
            assert info["distributed.scheduler.root-task-co-assignment"] == (mode == "coassign")
            assert info["distributed.scheduler.root-task-co-assignment-depth"] == 4

            fut = c.compute(tree_sum([delayed(slowroot)(i) for i in range(N_ROOTS)]))
            most = {}
            while not fut.done():
                for addr, n in c.run(roots_held).items():
                    most[addr] = max(most.get(addr, 0), n)
            assert fut.result(timeout=60) == sum(i * i for i in range(N_ROOTS))
            assert len(most) == 2, most
            if mode == "off":
                # every runnable root went out at once, half to each worker
                assert max(most.values()) >= N_ROOTS // 4, most
            else:
                # max(ceil(1.0 * 1 thread), 1) = 1 slot per worker
                assert max(most.values()) <= 1, most
    except BaseException:
        print(sched.logs()[-4000:])
        print(workers.logs())
        raise
    finally:
        workers.stop()
        sched.stop()


@pytest.mark.parametrize(
    "text, key",
    [
        ("worker-saturation: -1", "distributed.scheduler.worker-saturation"),
        ("worker-saturation: lots", "distributed.scheduler.worker-saturation"),
        ("root-task-co-assignment: sometimes", "distributed.scheduler.root-task-co-assignment"),
        ("root-task-co-assignment-depth: deep", "distributed.scheduler.root-task-co-assignment-depth"),
    ],
)
def test_bad_config_stops_startup(tmp_path, text, key):
    build_binary()
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("distributed:\n  scheduler:\n    " + text + "\n")
    proc = subprocess.run(
        [str(BINARY), "--host", "127.0.0.1", "--port", "0", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        env=python_env(),
    )
    assert proc.returncode != 0
    assert key in proc.stderr, proc.stderr
    assert "is not" in proc.stderr, proc.stderr
