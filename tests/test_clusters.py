"""Clusters that grow and shrink, with stock dask callers.

The package (compat/python) is imported from the checkout: its source folder
goes on sys.path here, and it runs the checkout's bin/dask-go-scheduler
(scripts/setup.sh builds it; build_binary rebuilds it when stale). The
installed package, built by pip in a fresh virtualenv, is tests/test_package.py's.

- LocalGoCluster.adapt(minimum=1, maximum=4): distributed's Adaptive asks our
  adaptive_target and workers_to_close; the cluster grows while work is
  queued and shrinks back to 1 when idle, every result exact.
- retire_workers of a worker holding the only copy of 100 keys: no key lost,
  none recomputed; with that worker SIGKILLed half-way through: every key
  still readable, only those without a copy yet recomputed.
- dask-jobqueue's LocalCluster(scheduler_cls=GoScheduler) scales to 2 jobs.
- --idle-timeout 5 and distributed.scheduler.idle-timeout stop an idle scheduler.
- The dask-kubernetes operator's scheduler command (`dask-scheduler --host
  0.0.0.0`; here with a free --port and --dashboard-address, since 8786/8787
  may be taken on a test machine) serves /health, check_idle,
  adaptive_target and retirement by name, as the operator calls them
  (distributed.core.rpc).
- Bad input: unknown retire_workers targets answer {} and touch nothing; a
  pickled workers_to_close key fails naming it; adapt(minimum=5, maximum=2)
  does what it does on distributed's LocalCluster.

Every process is stopped by its PID at the end, also on failure: the
schedulers by GoScheduler.close (LocalGoCluster, jobqueue) or cluster.stop,
the stock workers by Workers.stop, dask-jobqueue's jobs by their PIDs.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from distributed import Client, LocalCluster, wait
from distributed.core import rpc
from distributed.deploy.spec import SpecCluster

from cluster import (ORDER_CHECK, ROOT, Workers, build_binary, free_port, python_env, record_order_checks,
                     scheduler_identity, scheduler_workers, stop, wait_for)
from cluster import GoScheduler as GoProcess

PACKAGE_SRC = ROOT / "compat" / "python" / "src"
sys.path.insert(0, str(PACKAGE_SRC))
from dask_go_scheduler import GoScheduler, LocalGoCluster  # noqa: E402

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module", autouse=True)
def binary():
    try:
        return build_binary()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@contextmanager
def local_go_cluster(**kwargs):
    """LocalGoCluster with a free dashboard port and the dask.order check on;
    closed at the end (its scheduler stopped by PID, checked), also on failure."""
    kwargs.setdefault("dashboard_address", ":0")
    sk = dict(kwargs.pop("scheduler_kwargs", {}))
    sk.setdefault("env", {ORDER_CHECK: "True"})
    cluster = LocalGoCluster(scheduler_kwargs=sk, **kwargs)
    try:
        yield cluster
    finally:
        cluster.close()
        record_order_checks(cluster.scheduler.logs())
        assert cluster.scheduler.proc.poll() is not None, "the scheduler process outlived cluster.close()"


def call(address: str, op: str, **kwargs):
    """One RPC to the scheduler as the operator and Adaptive send it
    (distributed.core.rpc), from this synchronous test."""
    async def go():
        async with rpc(address) as r:
            return await getattr(r, op)(**kwargs)
    return asyncio.run(go())


def names_of(info: dict) -> list:
    return sorted((w["name"] for w in info["workers"].values()), key=str)


def slow_inc(x):
    time.sleep(0.25)
    return x + 1


def counted(i, log_dir):
    """i * 10, after appending i to log_dir/runs: one line per execution."""
    with open(os.path.join(log_dir, "runs"), "a") as f:
        f.write(f"{i}\n")
    return i * 10


def runs(log_dir) -> list[int]:
    try:
        return [int(x) for x in Path(log_dir, "runs").read_text().split()]
    except FileNotFoundError:
        return []


class Slow:
    """A value that claims 6 MB (sizeof) and takes 50 ms to pickle: a
    retiring worker hands its keys over in many small batches, so that a
    SIGKILL lands half-way through the hand-over."""

    def __init__(self, value):
        self.value = value

    def __sizeof__(self):
        return 6_000_000

    def __reduce__(self):
        time.sleep(0.05)
        return (Slow, (self.value,))


def counted_slow(i, log_dir):
    counted(i, log_dir)
    return Slow(i)


# ---------------------------------------------------------------- adapt


def test_adapt_grows_while_work_is_queued_and_shrinks_to_the_minimum_when_idle():
    with local_go_cluster(n_workers=1, threads_per_worker=1) as cluster, Client(cluster) as c:
        adaptive = cluster.adapt(minimum=1, maximum=4, interval="250ms")
        # 30 s of work for one thread: adaptive_target asks for ceil(30 s / 5 s)
        # workers, Adaptive caps that at maximum=4
        futs = c.map(slow_inc, range(120))
        seen = []
        while not all(f.done() for f in futs):
            seen.append(len(cluster.scheduler_info["workers"]))
            time.sleep(0.1)
        assert c.gather(futs) == [i + 1 for i in range(120)]
        assert max(seen) == 4, f"the cluster never reached 4 workers while work was queued: {sorted(set(seen))}"

        wait_for(lambda: len(cluster.scheduler_info["workers"]) == 1 and len(cluster.worker_spec) == 1,
                 60, "the idle cluster to shrink to minimum=1")
        time.sleep(1.5)  # several adapt intervals: it stays at the minimum
        assert len(cluster.scheduler_info["workers"]) == 1
        steps = [rec["status"] for _, rec in adaptive.log]
        assert steps[0] == "up" and steps[-1] == "down", list(adaptive.log)
        assert c.submit(slow_inc, 41).result() == 42


def test_worker_names_reach_the_cluster_object_unchanged():
    """SpecCluster tracks workers by name (LocalCluster's are ints 0..n-1):
    identity, subscribe_worker_status and workers_to_close(attribute="name")
    must give back the very names the workers registered with, as
    distributed's WorkerState.name does."""
    with local_go_cluster(n_workers=2, threads_per_worker=1, processes=False, memory_limit="1GiB") as cluster, \
            Client(cluster) as c:
        assert repr(cluster) == f"LocalGoCluster({cluster.name}, '{cluster.scheduler.address}', workers=2, threads=2, memory=2.00 GiB)"
        with urllib.request.urlopen(cluster.dashboard_link, timeout=10) as resp:
            assert resp.status == 200
        assert names_of(scheduler_identity(c)) == [0, 1]
        assert names_of(cluster.scheduler_info) == [0, 1]
        to_close = call(cluster.scheduler.address, "workers_to_close", n=1, attribute="name")
        assert list(to_close) in ([0], [1]), to_close


def test_adapt_minimum_above_maximum_does_what_distributed_does():
    """distributed does not refuse adapt(minimum=5, maximum=2): AdaptiveCore
    clamps the target to maximum, then to minimum, so the minimum wins.
    Compared with the stock LocalCluster (in-process Python scheduler)."""
    stock = LocalCluster(n_workers=0, processes=False, threads_per_worker=1, dashboard_address=":0")
    outcomes = {}
    try:
        for kind, cm in (("stock", stock), ("go", local_go_cluster(n_workers=0, processes=False, threads_per_worker=1))):
            with cm as cluster:
                adaptive = cluster.adapt(minimum=5, maximum=2, interval="100ms")
                wait_for(lambda: len(cluster.scheduler_info["workers"]) >= 5, 60, f"{kind}: 5 workers")
                time.sleep(1)
                outcomes[kind] = (len(cluster.scheduler_info["workers"]), [rec for _, rec in adaptive.log])
    finally:
        stock.close()
    assert outcomes["go"] == outcomes["stock"] == (5, [{"status": "up", "n": 5}])


# ---------------------------------------------------------------- retirement


@contextmanager
def go_and_two_workers(tmp_path, *a_args, sched_env=None):
    """Our binary (extra environment sched_env), worker a (extra flags a_args)
    and worker b, stock `dask worker`s; yields (scheduler, workers, client,
    address of a, address of b)."""
    sched = GoProcess(tmp_path, env={ORDER_CHECK: "True", **(sched_env or {})})
    workers = Workers(tmp_path)
    try:
        sched.start()
        a = workers.start(sched.address, "a", *a_args)
        workers.start(sched.address, "b")
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
            addr = {w["name"]: addr for addr, w in scheduler_workers(c).items()}
            yield sched, workers, c, a, addr["a"], addr["b"]
    except BaseException:
        print(f"--- scheduler log (tail)\n{sched.logs()[-6000:]}\n{workers.logs()}")  # shown with the failure
        raise
    finally:
        workers.stop()
        sched.stop()


def test_retire_the_worker_with_the_only_copy_of_100_keys_loses_and_recomputes_nothing(tmp_path):
    with go_and_two_workers(tmp_path) as (_, _, c, _, a, b):
        futs = c.map(counted, range(100), log_dir=str(tmp_path), workers=[a], allow_other_workers=False,
                     key=[f"only-on-a-{i}" for i in range(100)])
        wait(futs)
        before = c.gather(futs)
        assert all(holders == (a,) for holders in map(tuple, c.who_has(futs).values()))
        assert sorted(runs(tmp_path)) == list(range(100))

        retired = c.retire_workers(workers=[a])
        assert list(retired) == [a]
        assert retired[a]["name"] == "a"
        assert c.gather(futs) == before == [i * 10 for i in range(100)]
        assert all(holders == (b,) for holders in map(tuple, c.who_has(futs).values()))
        assert sorted(runs(tmp_path)) == list(range(100)), "a key was recomputed"
        assert list(scheduler_workers(c)) == [b]


def test_retiring_worker_sigkilled_half_way_keeps_what_was_copied_and_recomputes_the_rest(tmp_path):
    # a without a nanny: the SIGKILL ends the worker for good. Stealing is off:
    # b idles while a works through 100 loosely restricted tasks, and b may
    # steal loosely restricted tasks (stealing.py _get_thief, as distributed),
    # which would put keys on b before the retirement this test is about.
    no_stealing = {"DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}
    with go_and_two_workers(tmp_path, "--no-nanny", sched_env=no_stealing) as (_, _, c, a_proc, a, b):
        # a loose restriction: the keys go to a while it runs, and can be
        # recomputed on b once it is gone
        futs = c.map(counted_slow, range(100), log_dir=str(tmp_path), workers=[a], allow_other_workers=True,
                     key=[f"slow-on-a-{i}" for i in range(100)])
        wait(futs)
        assert all(holders == (a,) for holders in map(tuple, c.who_has(futs).values()))
        assert len(runs(tmp_path)) == 100

        result, failure = [], []

        def retire():
            try:
                result.append(c.retire_workers(workers=[a]))
            except Exception as e:  # noqa: BLE001 - reported below
                failure.append(e)

        t = threading.Thread(target=retire, daemon=True)
        t.start()
        on_b: set = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and t.is_alive():
            on_b = {k for k, holders in c.who_has(futs).items() if b in holders}
            if 10 <= len(on_b) <= 90:
                break
            time.sleep(0.02)
        assert t.is_alive() and 10 <= len(on_b) <= 90, \
            f"no moment half-way through the retirement to kill it ({len(on_b)} keys on b)"
        print(f"killing a with {len(on_b)} keys on b")
        a_proc.send_signal(signal.SIGKILL)
        a_proc.wait(10)

        t.join(60)
        assert not t.is_alive(), "retire_workers did not return after the retiring worker died"
        assert not failure, failure
        values = c.gather(futs)
        assert [v.value for v in values] == list(range(100))
        counts = {i: runs(tmp_path).count(i) for i in range(100)}
        copied = {int(k.rsplit("-", 1)[1]) for k in on_b}
        assert all(counts[i] == 1 for i in copied), "a key that had a copy on b was recomputed"
        recomputed = {i for i, n in counts.items() if n == 2}
        assert recomputed and recomputed <= set(range(100)) - copied
        assert max(counts.values()) == 2
        assert list(scheduler_workers(c)) == [b]


# ---------------------------------------------------------------- dask-jobqueue


def test_dask_jobqueue_local_cluster_with_go_scheduler_scales_to_two_jobs_and_computes(monkeypatch):
    from dask_jobqueue.local import LocalCluster as JobQueueLocalCluster

    monkeypatch.setenv("PYTHONPATH", python_env()["PYTHONPATH"])  # the jobs' workers import this module
    cluster = JobQueueLocalCluster(
        cores=1, processes=1, memory="1GiB", scheduler_cls=GoScheduler,
        scheduler_options={"host": "127.0.0.1", "dashboard_address": ":0", "env": {ORDER_CHECK: "True"}},
    )
    job_pids: set[int] = set()
    try:
        assert isinstance(cluster.scheduler, GoScheduler)
        cluster.scale(jobs=2)
        with Client(cluster) as c:
            c.wait_for_workers(2, timeout=120)
            job_pids = {int(job.job_id) for job in cluster.workers.values()}
            assert names_of(scheduler_identity(c)) == sorted(cluster.workers)  # "<cluster name>-<n>"
            futs = c.map(slow_inc, range(40))
            assert c.gather(futs) == [i + 1 for i in range(40)]
            assert len({w for ws in c.who_has(futs).values() for w in ws}) == 2
            cluster.scale(jobs=1)
            wait_for(lambda: len(scheduler_workers(c)) == 1, 60, "the cluster to go down to 1 job")
            assert c.submit(sum, range(10)).result() == 45
    finally:
        cluster.close()
        record_order_checks(cluster.scheduler.logs())
        for pid in job_pids:  # jobqueue's LocalJob kills its jobs by PID; check, and finish the job if not
            # its SIGKILL does not wait for the exit, which a loaded machine can take a moment to finish
            try:
                wait_for(lambda: not _alive(pid), 10, f"job {pid} to exit")
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"dask-jobqueue left job {pid} running after close()")
    assert cluster.scheduler.proc.poll() is not None


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ---------------------------------------------------------------- idle timeout


def test_idle_timeout_stops_an_idle_scheduler(tmp_path):
    """`--idle-timeout 5` and distributed.scheduler.idle-timeout: 5s each end
    an idle scheduler about 5 s after it started, by itself, exit code 0."""
    (tmp_path / "flag").mkdir()
    (tmp_path / "config").mkdir()
    by_flag = GoProcess(tmp_path / "flag", "--idle-timeout", "5")
    by_config = GoProcess(tmp_path / "config", env={"DASK_DISTRIBUTED__SCHEDULER__IDLE_TIMEOUT": "5s"})
    try:
        t0 = time.monotonic()
        procs = [by_flag.start().proc, by_config.start().proc]
        for sched, proc in zip((by_flag, by_config), procs):
            rc = proc.wait(timeout=30)
            took = time.monotonic() - t0
            assert rc == 0, sched.logs()
            assert took >= 4.5, f"stopped after {took:.1f} s, before the idle timeout"
            assert "closing after being idle" in sched.logs()
    finally:
        by_flag.stop()
        by_config.stop()


# ---------------------------------------------------------------- dask-kubernetes operator


@pytest.fixture
def kube_scheduler(tmp_path):
    """The operator's scheduler container command, `dask-scheduler --host
    0.0.0.0`, run through the package's launcher (python -m
    dask_go_scheduler: the `dask-scheduler` script's code, exec'ing the
    binary in the same process). --port and --dashboard-address pick free
    ports instead of 8786/8787, which may be taken here. Two stock workers
    named as the operator names them (<group>-worker-<id>)."""
    port, dash = free_port(), free_port()
    env = python_env({ORDER_CHECK: "True"})
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_SRC), env["PYTHONPATH"]])
    log = open(tmp_path / "scheduler.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "dask_go_scheduler", "--host", "0.0.0.0",
                             "--port", str(port), "--dashboard-address", f":{dash}"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    workers = Workers(tmp_path)
    address = f"tcp://127.0.0.1:{port}"
    try:
        # the readiness probe: GET /health on the dashboard port
        wait_for(lambda: _get(f"http://127.0.0.1:{dash}/health") == "ok", 30, "/health", proc)
        for name in ("default-worker-5d2f1", "default-worker-9ab4c"):
            workers.start(address, name)
        with Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
            yield address, c, proc
    finally:
        workers.stop()
        stop(proc)
        log.close()
        record_order_checks((tmp_path / "scheduler.log").read_text(errors="replace"))


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.read().decode()
    except OSError:
        return None


def test_kube_operator_command_serves_check_idle_and_adaptive_target(kube_scheduler):
    address, c, proc = kube_scheduler
    assert "--python" in " ".join(open(f"/proc/{proc.pid}/cmdline").read().split("\0")), \
        "the launcher did not exec the binary with --python in its own process"
    # idle: a Unix time in seconds, which the operator compares with time.time()
    idle = wait_for(lambda: call(address, "check_idle"), 10, "check_idle to report idleness")
    assert isinstance(idle, float) and time.time() - 120 < idle <= time.time()
    # no args, as the operator calls it; with no work and no data, distributed
    # answers len(workers) - len(workers_to_close()) = 0 (checked against a
    # stock Scheduler by hand), which the operator clamps to its minimum
    assert call(address, "adaptive_target") == 0

    t_submit = time.time()
    fut = c.submit(time.sleep, 2, pure=False)
    wait_for(lambda: call(address, "check_idle") is None, 2, "check_idle to report busy while a task runs")
    fut.result()
    idle = wait_for(lambda: call(address, "check_idle"), 10, "check_idle to report idleness again")
    assert idle >= t_submit


def test_kube_operator_retirement_by_name_and_bad_input_touching_nothing(kube_scheduler, tmp_path):
    address, c, _ = kube_scheduler
    futs = c.map(counted, range(40), log_dir=str(tmp_path), key=[f"k8s-{i}" for i in range(40)])
    wait(futs)
    holders = {w for ws in c.who_has(futs).values() for w in ws}
    assert len(holders) == 2, "the keys should start on both workers"
    before = scheduler_workers(c)

    # bad input first: unknown names and addresses answer {} and change nothing
    assert call(address, "retire_workers", names=["default-worker-nope"]) == {}
    assert call(address, "retire_workers", workers=["tcp://127.0.0.1:1"]) == {}
    with pytest.raises(Exception, match="key") as err:
        call(address, "workers_to_close", target=1, key=pickle.dumps(names_of), attribute="name")
    assert "worker_key" in str(err.value) or "pickled" in str(err.value), str(err.value)
    after = scheduler_workers(c)
    assert sorted(after) == sorted(before)
    assert {a: w["status"] for a, w in after.items()} == {a: "running" for a in before}
    assert c.gather(futs) == [i * 10 for i in range(40)]

    # the operator's scale-down: workers_to_close(n=k, attribute="name"), then retire_workers(names=...)
    to_close = call(address, "workers_to_close", n=1, attribute="name")
    assert len(to_close) == 1 and to_close[0] in {w["name"] for w in before.values()}, to_close
    retired = call(address, "retire_workers", names=to_close)
    assert [w["name"] for w in retired.values()] == list(to_close)
    left = scheduler_workers(c)
    assert [w["name"] for w in left.values()] == sorted({w["name"] for w in before.values()} - set(to_close))
    assert c.gather(futs) == [i * 10 for i in range(40)]
    assert sorted(runs(tmp_path)) == list(range(40)), "a key was recomputed after the retirement"


# ---------------------------------------------------------------- what cannot be mirrored


def test_what_cannot_be_mirrored_fails_at_once_naming_it():
    with pytest.raises(ValueError, match="inproc"):
        LocalGoCluster(n_workers=1, processes=False, protocol="inproc://")
    with pytest.raises(ValueError, match="blocked_handlers"):
        LocalGoCluster(n_workers=1, blocked_handlers=["feed"])
    with pytest.raises(ValueError, match="validate"):
        GoScheduler(validate=True)
    # a preload that cannot be imported stops the start, and the cluster
    # fails with its message
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="No module named 'no_such_preload_module'"):
        SpecCluster(scheduler={"cls": GoScheduler,
                               "options": {"preload": "no_such_preload_module", "dashboard_address": ":0"}},
                    workers={})
    assert time.monotonic() - t0 < 20


def test_spec_cluster_preload_with_argv():
    """GoScheduler's preload and preload_argv, as distributed.Scheduler's: the
    preload runs in the scheduler's Python host with its click options."""
    with SpecCluster(scheduler={"cls": GoScheduler, "options": {
            "preload": "preload_fixture", "preload_argv": ["--greeting", "salut"], "dashboard_address": ":0"}},
            workers={}) as cluster, Client(cluster) as c:
        assert c.sync(c.scheduler.greet, name="spec") == "salut, spec"


def test_dask_gateway_command_without_the_gateway_exits(tmp_path):
    """dask-gateway's scheduler command (dask_gateway_server backends/db_base.py
    get_scheduler_command) outside a gateway: its preload finds no
    DASK_GATEWAY_* variables and exits, which stops the start, as it stops
    distributed's scheduler (tests/test_gateway.py runs it inside one, over
    the gateway's TLS; plain tcp here, without certificates)."""
    args = ["--protocol", "tcp", "--port", "0", "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0",
            "--preload", "dask_gateway.scheduler_preload", "--dg-api-address", "127.0.0.1:0",
            "--dg-heartbeat-period", "15", "--dg-adaptive-period", "3", "--dg-idle-timeout", "0"]
    env = python_env()
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_SRC), env["PYTHONPATH"]])
    proc = subprocess.Popen([sys.executable, "-m", "dask_go_scheduler", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, cwd=tmp_path, text=True)
    try:
        out, _ = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert proc.returncode != 0, out
    assert "DASK_GATEWAY_CLUSTER_NAME" in out and "preload dask_gateway.scheduler_preload" in out, out


def test_local_go_cluster_over_tls_with_temporary_certificates():
    """LocalGoCluster(security=True), as LocalCluster(security=True): the
    cluster makes certificates (Security.temporary()), the scheduler listens
    on tls://, the workers and the client join with them, and the scheduler
    dials the workers over TLS when scaling down moves data."""
    with local_go_cluster(n_workers=2, threads_per_worker=1, memory_limit="1GiB", security=True) as cluster, \
            Client(cluster) as c:
        assert cluster.scheduler_address.startswith("tls://")
        workers = scheduler_workers(c)
        assert len(workers) == 2 and all(a.startswith("tls://") for a in workers)
        futures = c.map(slow_inc, range(20))
        assert c.gather(futures) == list(range(1, 21))
        cluster.scale(1)
        wait_for(lambda: len(scheduler_workers(c)) == 1, 30, "the scale-down to one worker")
        assert c.gather(futures) == list(range(1, 21))
