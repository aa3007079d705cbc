"""Worker loss, KilledWorker, and features the Go scheduler does not support
yet: each gives a correct result or a clear error, never a hang."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest
from distributed import Client
from distributed.scheduler import KilledWorker

from cluster import GoScheduler, Workers, wait_for

pytestmark = pytest.mark.timeout(180)


def slow_inc(x, delay=1.0):
    time.sleep(delay)
    return x + 1


def worker_pids(client):
    return client.run(os.getpid)


@pytest.fixture
def fresh_cluster(tmp_path):
    """A scheduler and two workers of our own: these tests kill workers."""

    def make(*scheduler_args, env=None):
        sched = GoScheduler(tmp_path, *scheduler_args, env=env)
        workers = Workers(tmp_path)
        cleanup.append((sched, workers))  # before start: stopped also if it never gets ready
        sched.start()
        workers.start(sched.address, "k1", env=env)
        workers.start(sched.address, "k2", env=env)
        return sched, workers

    cleanup: list = []
    yield make
    for sched, workers in cleanup:
        try:
            workers.stop()
        finally:  # the scheduler too when stopping a worker raised
            sched.stop()


def test_sigkill_worker_mid_computation(fresh_cluster):
    sched, _ = fresh_cluster()
    with Client(sched.address, timeout=30) as c:
        c.wait_for_workers(2, timeout=60)
        futures = c.map(slow_inc, range(8), delay=1.0)
        wait_for(lambda: c.processing() and any(c.processing().values()), 30, "tasks to start")
        pids = worker_pids(c)
        victim = sorted(pids)[0]
        os.kill(pids[victim], signal.SIGKILL)
        assert c.gather(futures) == [i + 1 for i in range(8)]


def die():
    os._exit(1)


def test_killed_worker_after_allowed_failures(fresh_cluster):
    env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    sched, _ = fresh_cluster(env=env)
    with Client(sched.address, timeout=30) as c:
        c.wait_for_workers(2, timeout=60)
        fut = c.submit(die, key="die-1")
        with pytest.raises(KilledWorker, match="die-1"):
            fut.result(timeout=60)
        # the cluster keeps working: the nanny replaced the dead worker
        assert c.submit(slow_inc, 1, delay=0).result(timeout=60) == 2


def test_unsupported_features_fail_fast(fresh_cluster):
    sched, _ = fresh_cluster()
    with Client(sched.address, timeout=30) as c:
        c.wait_for_workers(2, timeout=60)
        # run_on_scheduler runs in the scheduler-side Python host, a process
        # of its own (tests/test_host.py)
        assert c.run_on_scheduler(os.getpid) != sched.proc.pid

        from distributed.diagnostics.plugin import SchedulerPlugin

        class P(SchedulerPlugin):
            name = "local-plugin"

        # so do scheduler plugins (tests/test_scheduler_plugins.py)
        c.register_plugin(P())
        assert "local-plugin" in c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.plugins))


def test_restart(fresh_cluster):
    from distributed.client import FutureCancelledError

    sched, _ = fresh_cluster()
    with Client(sched.address, timeout=30) as c:
        c.wait_for_workers(2, timeout=60)
        before = set(c.nthreads())
        done = c.submit(slow_inc, 1, delay=0, key="before-restart")
        assert done.result() == 2
        running = c.submit(slow_inc, 2, delay=30, key="running-at-restart")
        c.restart(timeout=60)
        after = set(c.nthreads())
        assert len(after) == 2 and not (after & before), (before, after)
        with pytest.raises(FutureCancelledError):
            running.result(timeout=10)
        assert not c.who_has().get("before-restart")
        assert c.submit(slow_inc, 10, delay=0).result(timeout=30) == 11


def test_materialization_error_reaches_client(fresh_cluster, tmp_path):
    """A graph the scheduler cannot unpickle (a module only the client has)
    fails with the Python scheduler's RuntimeError, and the client goes on."""
    sched, _ = fresh_cluster()
    mod = tmp_path / "client_only_module_xyz.py"
    mod.write_text("def double(x):\n    return 2 * x\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import client_only_module_xyz

        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
            fut = c.submit(client_only_module_xyz.double, 21)
            with pytest.raises(RuntimeError, match="Error during deserialization of the task graph"):
                fut.result(timeout=60)
            assert c.submit(slow_inc, 1, delay=0).result(timeout=30) == 2
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("client_only_module_xyz", None)


def test_silent_worker_removed_after_worker_ttl(fresh_cluster):
    """A worker that stops answering (SIGSTOP: its TCP connections stay open)
    is restarted through its nanny after worker-ttl (the frozen process is
    killed) and its task finishes elsewhere."""
    env = {"DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": "1s"}
    sched, _ = fresh_cluster(env=env)
    with Client(sched.address, timeout=30) as c:
        c.wait_for_workers(2, timeout=60)
        fut = c.submit(slow_inc, 5, delay=3, key="on-frozen-worker")
        wait_for(lambda: any(c.processing().values()), 30, "the task to start")
        [holder] = [w for w, keys in c.processing().items() if keys]
        pid = c.run(os.getpid, workers=[holder])[holder]
        os.kill(pid, signal.SIGSTOP)
        try:
            assert fut.result(timeout=60) == 6
            assert holder not in c.nthreads()
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass  # its nanny killed it (restart_workers), as with distributed's scheduler


GATHER_AND_WAIT = """
import asyncio, sys
from distributed.core import rpc

async def main():
    async with rpc(sys.argv[1]) as r:
        print("gathering", flush=True)
        await r.gather(keys=[sys.argv[2]])

asyncio.run(main())
"""


def close_wait_peers(pid: int, port: int) -> list[str]:
    """The peers of the scheduler's accepted connections that the peer has
    closed and the scheduler has not (CLOSE_WAIT)."""
    import psutil

    return [f"{c.raddr.ip}:{c.raddr.port}" for c in psutil.Process(pid).net_connections(kind="tcp")
            if c.raddr and c.laddr.port == port and c.status == psutil.CONN_CLOSE_WAIT]


def test_gather_from_a_stopped_worker_ends_when_the_caller_leaves(fresh_cluster):
    """A gather waiting on a worker that stopped answering (SIGSTOP) ends
    once its caller hangs up: the scheduler closes the caller's connection
    instead of holding it until the worker comes back. Afterwards (the
    worker resumed) gathers from it work again."""
    import subprocess

    sched, _ = fresh_cluster()
    port = int(sched.address.rsplit(":", 1)[1])
    with Client(sched.address, timeout=30) as c:
        c.wait_for_workers(2, timeout=60)
        holder = sorted(c.nthreads())[0]
        fut = c.submit(slow_inc, 1, delay=0, key="held-by-one", workers=[holder])
        assert c.gather(fut) == 2  # through the scheduler: it now pools a connection to holder
        pid = c.run(os.getpid, workers=[holder])[holder]
        os.kill(pid, signal.SIGSTOP)
        caller = subprocess.Popen([sys.executable, "-c", GATHER_AND_WAIT, sched.address, "held-by-one"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert caller.stdout.readline().strip() == "gathering"
            time.sleep(1.0)  # the gather now waits on the stopped worker
            assert caller.poll() is None, "the gather returned from a stopped worker"
            caller.kill()
            caller.wait(timeout=10)
            # the caller's end is closed: the scheduler must close its own
            # within a few peer checks, not when the worker resumes
            wait_for(lambda: not close_wait_peers(sched.proc.pid, port), 10,
                     "the scheduler to close the departed caller's connection")
        finally:
            if caller.poll() is None:
                caller.kill()
            os.kill(pid, signal.SIGCONT)
        assert c.gather(fut) == 2


def test_no_workers_timeout_fails_tasks_no_worker_can_run(tmp_path):
    """distributed.scheduler.no-workers-timeout with stock processes: with
    no worker at all, a submitted task fails with NoWorkerError once the
    timeout has passed; with a running worker that lacks the resource a
    task asks for, it fails with NoValidWorkerError; tasks the worker can
    run still run, and nothing fails before its timeout."""
    from distributed.scheduler import NoValidWorkerError, NoWorkerError

    env = {"DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT": "1s"}
    sched = GoScheduler(tmp_path, env=env)
    workers = Workers(tmp_path)
    try:
        sched.start()
        with Client(sched.address, timeout=30) as c:
            alone = c.submit(slow_inc, 1, delay=0, key="no-worker-at-all")
            time.sleep(0.5)
            assert not alone.done(), "failed before no-workers-timeout"
            with pytest.raises(NoWorkerError, match="without any running workers"):
                alone.result(timeout=15)

            workers.start(sched.address, "nw1")
            c.wait_for_workers(1, timeout=60)
            gpu = c.submit(slow_inc, 2, delay=0, key="needs-a-gpu", resources={"GPU": 1})
            plain = c.submit(slow_inc, 3, delay=0, key="runs-anywhere")
            assert plain.result(timeout=30) == 4
            with pytest.raises(NoValidWorkerError, match="GPU"):
                gpu.result(timeout=15)
            events = [msg for _, msg in c.get_events("scheduler")
                      if isinstance(msg, dict) and msg.get("action") == "no-workers-timeout-exceeded"]
            assert [sorted(e["keys"]) for e in events] == [["no-worker-at-all"], ["needs-a-gpu"]]
    finally:
        workers.stop()
        sched.stop()
