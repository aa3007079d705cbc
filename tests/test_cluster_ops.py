"""Cluster ops beyond computing a graph, with stock Clients and stock `dask worker`s (with
nannies) against the Go scheduler: the task stream, the event log, scheduler
and worker logs, replicate, rebalance, retire_workers, worker plugins on a
worker that joins later, and upload_file."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from distributed import Client, get_task_stream, wait
from distributed.diagnostics.plugin import NannyPlugin, WorkerPlugin

from cluster import Workers, running_cluster, scheduler_workers, wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The Go scheduler and two stock workers, w1 and w2: every test starts
    with exactly these two. A test that needs more starts them with
    own_worker, which stops them by PID, and waits for the scheduler to
    drop them, when the test ends. Yields (scheduler, its directory)."""
    tmp = tmp_path_factory.mktemp("ops")
    # The AMM's ReduceReplicas undoes Client.replicate within an interval,
    # in distributed too; off here so the replica counts these tests read
    # are not raced by it (tests/test_amm.py covers the AMM).
    env = {"DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__START": "False"}

    def two_workers(sched, workers):
        workers.start(sched.address, "w1")
        workers.start(sched.address, "w2")

    with running_cluster(tmp, two_workers, 2, env=env) as sched:
        yield sched, tmp


@pytest.fixture
def client(cluster):
    with Client(cluster[0].address, timeout=30) as c:
        yield c


def inc(x):
    return x + 1


def worker_address(client, name: str) -> str | None:
    return next((a for a, w in scheduler_workers(client).items() if w["name"] == name), None)


@contextmanager
def own_worker(cluster, client, name: str):
    """A stock worker (with its nanny) called name for the length of the
    with block; yields its address. Stopped by PID at the end (also on
    failure); on success, the scheduler must also have dropped it, so the
    next test finds w1 and w2 alone again."""
    sched, tmp = cluster
    workers = Workers(tmp)
    try:
        workers.start(sched.address, name)
        yield wait_for(lambda: worker_address(client, name), 60, f"worker {name} to join")
    finally:
        workers.stop()
    wait_for(lambda: worker_address(client, name) is None, 30, f"worker {name} to leave the scheduler")


def counted(x, log_dir, tag):
    """x + 1, after appending a line to the file log_dir/tag: the number of
    lines is the number of times the task ran (data lost and silently
    recomputed shows up as a second line)."""
    with open(os.path.join(log_dir, tag), "a") as f:
        f.write(f"{os.getpid()}\n")
    return x + 1


def counted_blob(i, log_dir, tag):
    counted(i, log_dir, tag)
    return b"x" * 100_000


def runs_per_key(log_dir: Path, keys) -> dict:
    return {k: len((log_dir / k).read_text().splitlines()) if (log_dir / k).exists() else 0 for k in keys}


def rb_bytes(dask_worker) -> dict:
    """The bytes of each rb- key this worker holds in memory."""
    return {str(k): len(dask_worker.data[k]) for k in list(dask_worker.data.keys()) if str(k).startswith("rb-")}


def test_task_stream_records_start_and_stop(client):
    with get_task_stream(client) as ts:
        assert sum(client.gather(client.map(inc, range(5), key=[f"ts-{i}" for i in range(5)]))) == 15
    keys = {r["key"] for r in ts.data}
    assert {f"ts-{i}" for i in range(5)} <= keys
    for r in ts.data:
        assert r["status"] == "OK"
        assert r["worker"] in scheduler_workers(client)
        compute = [s for s in r["startstops"] if s["action"] == "compute"]
        assert compute and compute[0]["start"] <= compute[0]["stop"]
    recent = client.get_task_stream(count=5)
    assert {r["key"] for r in recent} == {f"ts-{i}" for i in range(5)}


def test_event_subscriber_and_get_events(client, cluster):
    got = []
    client.subscribe_topic("ops-topic", lambda ev: got.append(ev))
    time.sleep(0.3)  # subscribe-topic travels on the batched stream
    with Client(cluster[0].address, timeout=30) as other:
        other.log_event("ops-topic", {"n": 1})
    wait_for(lambda: got, 10, "event at the subscriber")
    t, msg = got[0]
    assert msg == {"n": 1} and abs(t - time.time()) < 60
    events = client.get_events("ops-topic")
    assert [m for _, m in events] == [{"n": 1}]

    def log_on_worker(dask_worker):
        dask_worker.log_event("ops-worker-topic", {"from": "worker"})

    client.run(log_on_worker, workers=[sorted(scheduler_workers(client))[0]])
    wait_for(lambda: client.get_events("ops-worker-topic"), 10, "worker event")
    (_, wmsg), = client.get_events("ops-worker-topic")
    assert wmsg["from"] == "worker" and wmsg["worker"] in scheduler_workers(client)
    client.unsubscribe_topic("ops-topic")


def test_worker_and_scheduler_logs(client):
    logs = client.get_worker_logs()
    assert set(logs) == set(scheduler_workers(client))
    for lines in logs.values():
        assert lines and all(len(x) == 2 for x in lines)
    slogs = client.get_scheduler_logs(n=20)
    assert slogs and all(len(x) == 2 and x[0] in {"DEBUG", "INFO", "WARNING", "ERROR"} for x in slogs)
    assert any("client connected" in msg or "worker registered" in msg for _, msg in client.get_scheduler_logs())


def test_replicate_puts_key_on_n_workers(client):
    f = client.submit(inc, 1, key="rep-1")
    wait(f)
    client.replicate([f], n=2)
    assert len(client.who_has([f])["rep-1"]) == 2
    client.replicate([f], n=1)
    wait_for(lambda: len(client.who_has([f])["rep-1"]) == 1, 10, "replicas dropped to 1")
    assert f.result() == 2


def test_rebalance_moves_data_without_copying_or_recomputing(client, tmp_path):
    """Ten 100 kB results on w1 alone, rebalanced: afterwards every key has
    exactly one holder (a copy would leave two), in the scheduler's view and
    in the workers' own memory; the bytes moved from w1 to w2 (evening them
    out); and no key was computed twice (data lost and recomputed would
    be)."""
    w1, w2 = worker_address(client, "w1"), worker_address(client, "w2")
    assert sorted(scheduler_workers(client)) == sorted([w1, w2])
    keys = [f"rb-{i}" for i in range(10)]
    # strictly on w1: stealing may move a loosely restricted task to w2 first
    futs = client.map(counted_blob, range(10), [str(tmp_path)] * 10, keys, key=keys, workers=[w1])
    wait(futs)
    before = client.run(rb_bytes)
    assert before == {w1: {k: 100_000 for k in keys}, w2: {}}, before

    client.rebalance(futs)
    who = client.who_has(futs)
    assert all(len(who[k]) == 1 for k in keys), who
    after = client.run(rb_bytes)
    # the workers' own memory agrees: each key in exactly one of them
    assert {k: [w] for w, held in after.items() for k in held} == {k: list(who[k]) for k in keys}, (after, who)
    moved, left = sum(after[w2].values()), sum(after[w1].values())
    assert moved + left == 1_000_000 and moved >= 400_000 and left >= 400_000, after
    counts = {w: sum(k.startswith("rb-") for k in held) for w, held in client.has_what().items()}
    assert counts[w1] < 10 and counts[w2] > 0 and counts[w1] + counts[w2] == 10, counts

    assert all(x == b"x" * 100_000 for x in client.gather(futs))
    assert runs_per_key(tmp_path, keys) == {k: 1 for k in keys}


def test_upload_file_makes_module_importable(client, cluster):
    tmp = cluster[1]
    mod = tmp / "ops_uploaded_mod.py"
    mod.write_text("def answer():\n    return 42\n")
    client.upload_file(str(mod))

    def use():
        import ops_uploaded_mod
        return ops_uploaded_mod.answer()

    assert client.submit(use, pure=False).result() == 42
    assert set(client.run(use).values()) == {42}


def test_upload_file_module_named_by_reference(client, cluster, tmp_path):
    """A function of an uploaded module, given to submit and map, is
    pickled by reference: the scheduler unpickles the graph, so the module
    must import there, as on distributed's scheduler (SchedulerUploadFile).
    It still does in a graph helper started after the upload, and
    run_on_scheduler imports it. (A broken file's SyntaxError at the client
    is not checked here: the workers' half of the upload stays registered
    and breaks every worker that joins this shared cluster later.)"""
    import sys

    import psutil

    moddir = tmp_path / "client-only"  # on this process's path alone
    moddir.mkdir()
    name = f"ops_ref_mod_{os.getpid()}"
    (moddir / f"{name}.py").write_text("def answer(x):\n    return x + 42\n")
    sys.path.insert(0, str(moddir))
    try:
        client.upload_file(str(moddir / f"{name}.py"))
        mod = __import__(name)
        assert client.submit(mod.answer, 1).result(timeout=60) == 43
        assert client.run_on_scheduler(lambda: __import__(name).answer(2)) == 44

        helpers = client.sync(client.scheduler.identity)["daskgo"]["helper_pids"]
        assert helpers and os.getpid() not in helpers
        for pid in helpers:
            psutil.Process(pid).kill()
        wait_for(lambda: set(client.sync(client.scheduler.identity)["daskgo"]["helper_pids"]) - set(helpers),
                 60, "a graph helper started after the kill")
        assert sum(client.gather(client.map(mod.answer, range(10)), direct=False)) == 465
    finally:
        sys.path.remove(str(moddir))


class MarkerPlugin(WorkerPlugin):
    def __init__(self, directory):
        self.directory = directory

    def setup(self, worker):
        import pathlib
        pathlib.Path(self.directory, f"setup-{worker.name}").write_text(worker.address)

    def teardown(self, worker):
        pass


def test_worker_plugin_setup_runs_on_later_worker(client, cluster):
    _, tmp = cluster
    marks = tmp / "plugin-marks"
    marks.mkdir()
    client.register_plugin(MarkerPlugin(str(marks)), name="marker")
    try:
        assert {p.name for p in marks.iterdir()} == {"setup-w1", "setup-w2"}
        with own_worker(cluster, client, "w3"):
            wait_for(lambda: (marks / "setup-w3").exists(), 30, "plugin setup on the late worker")
    finally:
        client.unregister_worker_plugin("marker")
    with pytest.raises(Exception, match="does not exist"):
        client.unregister_worker_plugin("marker")


def retire_and_check(client, cluster, tmp_path: Path, name: str, n: int, by_address: bool) -> None:
    """Start a worker `name`, put n results on it alone, retire it (by name
    or by address, closing it), and check that it is gone and every result
    is still there, held by others, and was computed once. The tasks are
    restricted to the worker strictly: with allow_other_workers, stealing
    may move a task without dependencies to an idle worker (as Python's
    steal_time_ratio allows), and the results would not all start on it. A
    result the retirement lost could then not run anywhere (its only valid
    worker is gone), so it shows as a result that times out; one recomputed
    shows in the run count."""
    with own_worker(cluster, client, name) as address:
        keys = [f"retire-{name}-{i}" for i in range(n)]
        futs = client.map(counted, range(n), [str(tmp_path)] * n, keys, key=keys, workers=[address])
        wait(futs, timeout=60)
        who = client.who_has(futs)
        assert all(list(holders) == [address] for holders in who.values()), (address, who)
        if by_address:
            retired = client.retire_workers(workers=[address], close_workers=True)
        else:
            retired = client.retire_workers(names=[name], close_workers=True)
        assert list(retired) == [address]
        assert address not in scheduler_workers(client)
        assert [f.result(timeout=60) for f in futs] == [i + 1 for i in range(n)]
        assert all(holders and address not in holders for holders in client.who_has(futs).values())
        assert runs_per_key(tmp_path, keys) == {k: 1 for k in keys}


def test_retire_workers_moves_data_first(client, cluster, tmp_path):
    retire_and_check(client, cluster, tmp_path, "w5", 20, by_address=False)


class NannyMarker(NannyPlugin):
    def __init__(self, directory):
        self.directory = directory

    def setup(self, nanny):
        import pathlib
        pathlib.Path(self.directory, f"nanny-{nanny.name}").write_text(nanny.address)


def test_nanny_plugin_setup_runs_on_current_and_later_nannies(client, cluster):
    """A NannyPlugin goes to the running nannies at once and, through the
    register_nanny reply, to a nanny that starts later."""
    _, tmp = cluster
    marks = tmp / "nanny-marks"
    marks.mkdir()
    client.register_plugin(NannyMarker(str(marks)), name="nanny-marker")
    try:
        assert {p.name for p in marks.iterdir()} == {"nanny-w1", "nanny-w2"}
        with own_worker(cluster, client, "w4"):
            wait_for(lambda: (marks / "nanny-w4").exists(), 30, "nanny plugin setup on the late nanny")
    finally:
        client.unregister_worker_plugin("nanny-marker", nanny=True)


def test_retire_workers_by_address(client, cluster, tmp_path):
    """retire_workers(workers=[address]) moves the data the worker alone
    holds, then removes and closes it."""
    retire_and_check(client, cluster, tmp_path, "w6", 10, by_address=True)
