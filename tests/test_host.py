"""The scheduler-side Python host, from stock Clients against stock workers:
Client.run_on_scheduler (reading dask_scheduler's tasks and workers, an
exception, a coroutine function, one that sleeps and holds only its caller),
a handler a run_on_scheduler function registers reached as
client.scheduler.<op>(), and a host SIGKILLed mid-call."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest
from distributed import Client

from cluster import GoScheduler, Workers, wait_for

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("host")
    sched = GoScheduler(tmp).start()
    workers = Workers(tmp)
    try:
        for name in ("w0", "w1"):
            workers.start(sched.address, name)
        with Client(sched.address, timeout=60) as c:
            c.wait_for_workers(2, timeout=120)
        yield sched
    finally:
        workers.stop()
        sched.stop()


def client(cluster) -> Client:
    return Client(cluster.address, timeout=60)


def host_pid(c) -> int:
    return c.run_on_scheduler(os.getpid)


def test_run_on_scheduler_reads_tasks_and_workers(cluster):
    with client(cluster) as c:
        futs = c.map(lambda x: x + 1, range(50), key=[f"inc-{i}" for i in range(50)])
        assert c.gather(futs) == list(range(1, 51))

        def look(dask_scheduler):
            ts = dask_scheduler.tasks
            ws = dask_scheduler.workers
            one = ts["inc-7"]
            return {
                "n_mine": sum(1 for k in ts if str(k).startswith("inc-")),
                "state": one.state,
                "who_has": sorted(w.address if hasattr(w, "address") else w for w in one.who_has),
                "prefix": one.prefix.name,
                "workers": sorted(ws),
                "names": sorted(w.name for w in ws.values()),
                "nthreads": sorted(w.nthreads for w in ws.values()),
                "has_what": sum(len(w.has_what) for w in ws.values()),
                "address": dask_scheduler.address,
                "id": dask_scheduler.id,
            }

        got = c.run_on_scheduler(look)
        info = c.scheduler_info()
        assert got["n_mine"] == 50
        assert got["state"] == "memory"
        assert got["who_has"] and set(got["who_has"]) <= set(info["workers"])
        assert got["prefix"] == "inc"
        assert got["workers"] == sorted(info["workers"])
        assert got["names"] == ["w0", "w1"]
        assert got["nthreads"] == [1, 1]
        assert got["has_what"] >= 50
        assert got["address"] == cluster.address
        assert got["id"] == info["id"]
        del futs


def test_run_on_scheduler_plain_value_and_args(cluster):
    with client(cluster) as c:
        assert c.run_on_scheduler(lambda: 1) == 1
        assert c.run_on_scheduler(lambda a, b=2: a * b, 21) == 42
        assert c.run_on_scheduler(lambda a, b=2: a * b, 5, b=3) == 15


class Boom(ValueError):
    pass


def test_run_on_scheduler_exception_returned(cluster):
    def fail():
        raise ValueError("nope from the scheduler")

    with client(cluster) as c:
        with pytest.raises(ValueError, match="nope from the scheduler"):
            c.run_on_scheduler(fail)
        assert c.run_on_scheduler(lambda: 2) == 2


def test_run_on_scheduler_async(cluster):
    async def co(x, dask_scheduler=None):
        await asyncio.sleep(0.05)
        return x, len(dask_scheduler.workers)

    with client(cluster) as c:
        assert c.run_on_scheduler(co, 7) == (7, 2)


def test_sleeping_function_holds_only_its_caller(cluster):
    """One client's run_on_scheduler sleeps for 20 s; meanwhile another
    client's run_on_scheduler and a computation complete."""
    done = threading.Event()
    result = {}

    def sleeper():
        with client(cluster) as c1:
            result["v"] = c1.run_on_scheduler(lambda: (time.sleep(20), "slept")[1])
            done.set()

    t = threading.Thread(target=sleeper, daemon=True)
    t.start()
    time.sleep(1.5)  # the sleeping call is in the host
    start = time.monotonic()
    with client(cluster) as c2:
        assert c2.run_on_scheduler(lambda: "quick") == "quick"
        assert c2.submit(sum, [1, 2, 3]).result(timeout=30) == 6
        futs = c2.map(lambda x: x * 2, range(100))
        assert sum(c2.gather(futs)) == 9900
    elapsed = time.monotonic() - start
    assert not done.is_set(), "the sleeper should still be sleeping"
    assert elapsed < 15, f"other work took {elapsed:.1f} s behind a sleeping run_on_scheduler"
    t.join(60)
    assert result.get("v") == "slept"


def test_forwarded_handler(cluster):
    def install(dask_scheduler):
        def add(comm, x, y):
            return {"sum": x + y, "peer": comm.peer_address is not None}

        async def nworkers():
            return len(dask_scheduler.workers)

        dask_scheduler.handlers["my_add"] = add
        dask_scheduler.handlers["my_nworkers"] = nworkers
        dask_scheduler.my_state = 5  # arbitrary attributes stay
        return True

    with client(cluster) as c:
        assert c.run_on_scheduler(install)

        async def call():
            return await c.scheduler.my_add(x=2, y=40), await c.scheduler.my_nworkers()

        out = c.sync(call)
        assert out[0] == {"sum": 42, "peer": True}
        assert out[1] == 2
        assert c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.my_state) == 5

        def no_attr(dask_scheduler):
            return dask_scheduler.transitions

        with pytest.raises(AttributeError, match="dask-go-scheduler"):
            c.run_on_scheduler(no_attr)


def test_host_killed_mid_call(cluster):
    """SIGKILL the host while a call runs in it: that call fails naming the
    exit status, the next call starts a new host, and futures stay exact."""
    with client(cluster) as c:
        futs = c.map(lambda x: x ** 2, range(200))
        pid = host_pid(c)
        out = {}

        def slow():
            try:
                out["v"] = c.run_on_scheduler(lambda: time.sleep(60))
            except Exception as e:  # noqa: BLE001 - the test reads it
                out["e"] = e

        t = threading.Thread(target=slow, daemon=True)
        t.start()
        time.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
        t.join(30)
        assert "e" in out, out
        assert "signal: killed" in str(out["e"]), str(out["e"])
        new = host_pid(c)
        assert new != pid
        assert c.run_on_scheduler(lambda: 3) == 3
        assert c.gather(futs) == [x ** 2 for x in range(200)]
        log = cluster.logs_when(lambda text: "host exited" in text)
        assert "signal: killed" in log


def test_forwarded_stream_handler(cluster):
    """An op on a client's batched stream that a run_on_scheduler function
    put in dask_scheduler.stream_handlers reaches it, with the client's id."""

    def install(dask_scheduler):
        dask_scheduler.seen = []

        def note(client=None, x=None):
            dask_scheduler.seen.append((client, x))

        dask_scheduler.stream_handlers["my_note"] = note

    with client(cluster) as c:
        c.run_on_scheduler(install)
        for i in range(3):
            c._send_to_scheduler({"op": "my_note", "x": i})
        seen = wait_for(lambda: (lambda s: s if len(s) == 3 else None)(
            c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.seen)), 30, "stream ops in the host")
        assert sorted(x for _, x in seen) == [0, 1, 2]
        assert {cid for cid, _ in seen} == {c.id}
        assert c.submit(sum, [1, 1]).result(timeout=30) == 2
