"""Coordination primitives through the Go scheduler with stock Clients and
stock workers: Lock, Semaphore, MultiLock, Event, Variable, Queue,
published datasets, fire_and_forget and scheduler metadata, as
distributed's scheduler extensions provide them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, Event, Lock, MultiLock, Queue, Semaphore, Variable, fire_and_forget

from cluster import GoScheduler, Workers, python_env, running_cluster, stop, wait_for

pytestmark = pytest.mark.timeout(120)

LEASE_TIMEOUT = "2s"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The Go scheduler checking leases every 0.2 s, and two stock workers
    (1 and 2 threads) whose Locks use a 2 s lease timeout."""
    tmp = tmp_path_factory.mktemp("coordination")
    sched = GoScheduler(tmp, env={"DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_VALIDATION_INTERVAL": "0.2s"})
    workers = Workers(tmp)
    # HDF5's own fcntl file lock conflicts across the processes that
    # xarray's to_netcdf opens the file from (serialised by the distributed
    # Lock instead), as pangeo deployments find: turn it off
    env = {"DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_TIMEOUT": LEASE_TIMEOUT, "HDF5_USE_FILE_LOCKING": "FALSE"}
    try:
        sched.start()
        workers.start(sched.address, "w1", nthreads=1, env=env)
        workers.start(sched.address, "w2", nthreads=2, env=env)
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        yield sched
    finally:
        workers.stop()
        sched.stop()


@pytest.fixture
def client(cluster):
    with Client(cluster.address, timeout=30) as c:
        yield c


def while_blocked(wait, then):
    """Run wait() in a thread, do then() once it is blocked, and return what
    wait() returned."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("v", wait()))
    t.start()
    time.sleep(0.3)
    then()
    t.join(30)
    assert "v" in out, "the blocked call did not return"
    return out["v"]


def critical_section(i, lock, path, hold=0.05):
    """Read-modify-write a counter file under the lock; return the time span
    the lock was held and the process that held it."""
    with lock:
        t0 = time.time()
        n = int(open(path).read())
        time.sleep(hold)
        with open(path, "w") as f:
            f.write(str(n + 1))
        return t0, time.time(), os.getpid()


def max_overlap(spans):
    """The most spans (t0, t1, ...) open at one time; a span ending when
    another starts does not overlap it."""
    events = sorted([(s[0], 1) for s in spans] + [(s[1], -1) for s in spans], key=lambda e: (e[0], e[1]))
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def test_lock_mutual_exclusion(client, tmp_path):
    path = tmp_path / "counter"
    path.write_text("0")
    lock = Lock("counter-lock")
    futures = client.map(critical_section, range(20), lock=lock, path=str(path), pure=False)
    spans = client.gather(futures)
    assert path.read_text() == "20"  # no lost update
    assert max_overlap(spans) == 1
    # the holders were the two worker processes (so the exclusion held across
    # processes), never this one
    assert {pid for _, _, pid in spans} == set(client.run(os.getpid).values()), spans
    assert lock.acquire(timeout=1)
    other = Lock("counter-lock")
    assert not other.acquire(blocking=False)
    assert not other.acquire(timeout=0.3)
    lock.release()
    assert other.acquire(timeout=5)
    other.release()


def test_semaphore_bounds_concurrent_holders(client, tmp_path):
    sem = Semaphore(max_leases=2, name="two-at-a-time")
    path = tmp_path / "counter"
    path.write_text("0")

    def hold(i, sem):
        with sem:
            t0 = time.time()
            time.sleep(0.3)
            return t0, time.time()

    spans = client.gather(client.map(hold, range(9), sem=sem, pure=False))
    assert max_overlap(spans) == 2  # three worker threads, two leases
    assert sem.get_value() == 0
    with pytest.raises(ValueError, match="Inconsistent max leases"):
        Semaphore(max_leases=3, name="two-at-a-time").register()
    sem.close()


HOLDER = """
import sys, time
from distributed import Client, Lock
c = Client(sys.argv[1], timeout=30)
lock = Lock("held-by-the-dead")
assert lock.acquire(timeout=10)
print("acquired", flush=True)
time.sleep(600)
"""


def test_lease_expires_when_holder_dies(cluster, tmp_path):
    env = python_env({"DASK_DISTRIBUTED__SCHEDULER__LOCKS__LEASE_TIMEOUT": LEASE_TIMEOUT})
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, cluster.address], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=env, text=True)
    try:
        assert holder.stdout.readline().strip() == "acquired"
        with dask.config.set({"distributed.scheduler.locks.lease-timeout": LEASE_TIMEOUT}):
            with Client(cluster.address, timeout=30) as c:
                lock = Lock("held-by-the-dead")
                # the holder refreshes its lease: it is not taken over
                assert not lock.acquire(timeout=3)
                holder.kill()
                holder.wait(10)
                t0 = time.monotonic()
                assert lock.acquire(timeout=20)
                assert time.monotonic() - t0 < 10
                lock.release()
    finally:
        stop(holder)


def test_multilock(client):
    a = MultiLock(names=["ml-a", "ml-b"])
    b = MultiLock(names=["ml-b", "ml-c"])
    assert a.acquire(timeout=5)
    assert not b.acquire(timeout=0.3)
    t0 = time.monotonic()
    assert not b.acquire(blocking=False)  # sent as timeout=0: must not wait for the holder
    assert time.monotonic() - t0 < 5
    c = MultiLock(names=["ml-c"])
    assert c.acquire(timeout=5)  # ml-c is free
    c.release()
    assert while_blocked(lambda: b.acquire(timeout=20), a.release) is True
    b.release()


def test_event_across_clients(cluster):
    with Client(cluster.address, timeout=30) as c1, Client(cluster.address, timeout=30) as c2:
        e1 = Event("go", client=c1)
        e2 = Event("go", client=c2)
        assert not e1.is_set()
        assert not e1.wait(timeout=0.2)
        assert while_blocked(lambda: e1.wait(timeout=30), e2.set) is True
        assert e1.is_set() and e1.wait(timeout=0)
        e2.clear()
        assert not e1.is_set()
        assert not e1.wait(timeout=0.2)


def inc(x):
    return x + 1


def test_variable_carries_future(cluster):
    with Client(cluster.address, timeout=30) as c1, Client(cluster.address, timeout=30) as c2:
        v1 = Variable("shared-var", client=c1)
        fut = c1.submit(inc, 41, key="var-future")
        v1.set(fut)
        del fut  # the first client drops its reference
        time.sleep(0.5)
        v2 = Variable("shared-var", client=c2)
        got = v2.get(timeout=10)
        assert got.result(timeout=30) == 42
        v1.set({"plain": [1, 2, 3]})
        # msgpack lists come back as tuples, with distributed's scheduler too
        assert v2.get() == {"plain": (1, 2, 3)}
        v1.set(np.arange(3))  # not msgpack: pickled by the client, kept as sent
        assert (v2.get() == np.arange(3)).all()
        v2.delete()
        with pytest.raises(TimeoutError):
            Variable("never-set", client=c2).get(timeout=0.3)


def test_variable_get_waits_for_set(cluster):
    with Client(cluster.address, timeout=30) as c1, Client(cluster.address, timeout=30) as c2:
        got = while_blocked(lambda: Variable("later", client=c2).get(timeout=30),
                            lambda: Variable("later", client=c1).set(7))
        assert got == 7


def test_queue_carries_futures(cluster):
    with Client(cluster.address, timeout=30) as c1, Client(cluster.address, timeout=30) as c2:
        q1 = Queue("shared-q", client=c1)
        futs = c1.map(inc, range(5), key=[f"q-{i}" for i in range(5)])
        for f in futs:
            q1.put(f)
        q1.put("plain")
        del futs, f  # the first client drops its references
        time.sleep(0.5)
        q2 = Queue("shared-q", client=c2)
        assert q2.qsize() == 6
        got = [q2.get(timeout=10) for _ in range(5)]
        assert [g.result(timeout=30) for g in got] == [1, 2, 3, 4, 5]
        assert q2.get(timeout=5) == "plain"
        with pytest.raises(TimeoutError):
            q2.get(timeout=0.3)
        q1.put(1)
        q1.put(2)
        assert q2.get(batch=True) == [1, 2]
        assert while_blocked(lambda: q2.get(timeout=30), lambda: q1.put("late")) == "late"


def test_published_dataset_survives_client_exit(cluster):
    with Client(cluster.address, timeout=30) as c1:
        x = da.arange(100, chunks=10).persist()
        c1.publish_dataset(x, name="arr")
        c1.datasets["one"] = c1.submit(inc, 1)
        assert sorted(c1.list_datasets()) == ["arr", "one"]
        with pytest.raises(KeyError):
            c1.publish_dataset(x, name="arr")
        del x
    with Client(cluster.address, timeout=30) as c2:
        assert sorted(c2.list_datasets()) == ["arr", "one"]
        arr = c2.get_dataset("arr")
        assert int(arr.sum().compute()) == sum(range(100))
        assert c2.datasets["one"].result(timeout=30) == 2
        del c2.datasets["one"]
        c2.unpublish_dataset("arr")
        assert list(c2.list_datasets()) == []
        with pytest.raises(KeyError):
            c2.get_dataset("arr")
        assert c2.get_dataset("arr", default=None) is None


def wait_for_event(name, started):
    """Note (in the file `started`) that it runs, then wait for the Event
    `name` (at most 60 s)."""
    Path(started).write_text(str(os.getpid()))
    if not Event(name).wait(timeout=60):
        raise TimeoutError(f"event {name} was never set")
    return "kept alive"


def write_marker(value, path):
    Path(path).write_text(value)
    return path


def test_fire_and_forget_keeps_graph_after_client_closed(cluster, tmp_path):
    """A task fired and forgotten whose dependency is still running when the
    firing client releases its futures and closes: the scheduler keeps both
    for the fire-and-forget pseudo-client. The dependency waits for an Event
    set only after that client is gone, and the fired task, which writes the
    marker, can only run once its dependency finished: the marker proves the
    scheduler kept the graph although no client held any of its futures (had
    it released them, the worker would have dropped the dependency's result
    and the fired task would never run)."""
    name = f"ff-{uuid.uuid4().hex}"
    started, marker = tmp_path / "started", tmp_path / "fired"
    with Client(cluster.address, timeout=30) as c:
        first = c.submit(wait_for_event, name, str(started), pure=False)
        fire_and_forget(c.submit(write_marker, first, str(marker), pure=False))
        wait_for(started.exists, 30, "the dependency to start")
        del first
    with Client(cluster.address, timeout=30) as c2:
        assert not marker.exists()  # the fired task cannot have run yet
        Event(name, client=c2).set()
        wait_for(marker.exists, 30, "the fire-and-forget task's marker")
        assert marker.read_text() == "kept alive"


def test_metadata_round_trip(client):
    client.set_metadata(["meta", "a", "b"], 123)
    client.set_metadata("top", {"x": [1, 2]})
    assert client.get_metadata("meta") == {"a": {"b": 123}}
    assert client.get_metadata(["meta", "a", "b"]) == 123
    assert list(client.get_metadata(["top", "x"])) == [1, 2]  # a tuple, as from distributed
    assert client.get_metadata(["meta", "missing"], default="d") == "d"
    with pytest.raises(KeyError):
        client.get_metadata(["meta", "missing"])


def install_lock_recorder(name, log):
    """Instrument distributed.Lock in this process: every hold of a Lock
    called `name` appends "pid requested acquired released" to the file
    `log`: when acquire was called, and the critical section's times taken
    inside it (after acquire returned, before release starts)."""
    from distributed import Lock as DLock

    if "_recorder_originals" in vars(DLock):
        remove_lock_recorder()
    orig_acquire, orig_release = DLock.acquire, DLock.release
    own = {k: vars(DLock)[k] for k in ("acquire", "release") if k in vars(DLock)}
    acquired = {}

    def acquire(self, *args, **kwargs):
        requested = time.time()
        ok = orig_acquire(self, *args, **kwargs)
        if ok and self.name == name:
            acquired[(id(self), threading.get_ident())] = requested, time.time()
        return ok

    def release(self):
        if self.name == name:
            requested, t0 = acquired.pop((id(self), threading.get_ident()))
            with open(log, "a") as f:
                f.write(f"{os.getpid()} {requested!r} {t0!r} {time.time()!r}\n")
        return orig_release(self)

    DLock.acquire, DLock.release = acquire, release
    DLock._recorder_originals = own
    return os.getpid()


def remove_lock_recorder():
    from distributed import Lock as DLock

    own = vars(DLock).get("_recorder_originals")
    if own is None:
        return
    for k in ("acquire", "release"):
        if k in own:
            setattr(DLock, k, own[k])
        else:
            delattr(DLock, k)
    del DLock._recorder_originals


def test_xarray_to_netcdf_serializes_writers_with_a_distributed_lock(tmp_path, monkeypatch):
    """Dataset.to_netcdf under a distributed Client writes its chunks through
    xarray's write lock, a distributed.Lock named after the file. On a
    cluster of its own, two stock workers of one thread each (so that
    only the distributed Lock can keep their writes apart; with two threads
    in one worker, xarray's CombinedLock may take its per-process HDF5 lock
    and the distributed Lock in either order and deadlock itself), every
    hold of that Lock is recorded from inside its critical section, here
    and in both workers. While this test holds the lock the chunk writes
    wait: the write has not finished 3 s later, and the writers of both
    worker processes asked for the lock during the test's hold and got it
    only after its release. No two holds overlap, the chunks were written
    in both worker processes, and the file reads back equal."""
    monkeypatch.setenv("HDF5_USE_FILE_LOCKING", "FALSE")  # as the workers'
    # both pinned in requirements.txt: a missing one is an error, not a skip
    import h5netcdf  # noqa: F401 - the scipy engine refuses the distributed scheduler
    import xarray as xr

    data = da.random.default_rng(0).random((40, 30), chunks=(10, 10))
    ds = xr.Dataset({"v": (("x", "y"), data)}, coords={"x": np.arange(40), "y": np.arange(30)})
    path = tmp_path / "out.nc"
    log = tmp_path / "lock-spans"
    env = {"HDF5_USE_FILE_LOCKING": "FALSE"}

    def start(sched, workers):
        workers.start(sched.address, "x1", nthreads=1, env=env)
        workers.start(sched.address, "x2", nthreads=1, env=env)

    with running_cluster(tmp_path, start, 2) as sched, Client(sched.address, timeout=30) as client:
        worker_pids = set(client.run(install_lock_recorder, str(path), str(log)).values())
        install_lock_recorder(str(path), str(log))
        try:
            released = write_while_held(client, ds, path)
        finally:
            remove_lock_recorder()
            client.run(remove_lock_recorder)
    spans = [(float(t0), float(t1), int(pid), float(req)) for pid, req, t0, t1 in
             (line.split() for line in log.read_text().splitlines())]
    on_workers = [sp for sp in spans if sp[2] in worker_pids]
    # one hold per chunk write (4 x 3 chunks of v), in both worker processes
    assert len(on_workers) == data.npartitions, spans
    assert {sp[2] for sp in on_workers} == worker_pids, spans
    # in each worker process a writer waited for the test's hold to end
    waited = {sp[2] for sp in on_workers if sp[3] < released <= sp[0]}
    assert waited == worker_pids, (released, sorted(spans))
    assert max_overlap(spans) == 1, sorted(spans)
    with xr.open_dataset(path, engine="h5netcdf") as back:
        xr.testing.assert_equal(back.load(), ds.compute())


def write_while_held(client, ds, path) -> float:
    """ds.to_netcdf(path) with its chunk writes computed while this process
    holds the file's distributed Lock for 3 s: the write must still be
    running then, and must finish once the lock is released. Returns the
    time of the release."""
    # creates the file and writes the coordinates here; the chunks of v
    # are written by the tasks of the delayed it returns
    store = ds.to_netcdf(path, engine="h5netcdf", compute=False)
    held = Lock(str(path))  # with the default client: this test's
    assert held.acquire(timeout=10)
    errors = []

    def write():
        try:
            client.compute(store).result(timeout=60)
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    time.sleep(3)
    assert writer.is_alive(), f"the chunks were written while their write lock was held elsewhere: {errors}"
    released = time.time()
    held.release()
    writer.join(90)
    assert not writer.is_alive() and not errors, errors
    return released
