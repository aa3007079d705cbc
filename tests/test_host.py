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

from cluster import scheduler_identity, scheduler_workers, two_worker_cluster, wait_for

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_worker_cluster(tmp_path_factory.mktemp("host")) as sched:
        yield sched


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
                "who_has": sorted(w.address for w in one.who_has),
                "who_has_names": sorted(w.name for w in one.who_has),
                "holder_in_workers": all(w in ws.values() for w in one.who_has),
                "prefix": one.prefix.name,
                "workers": sorted(ws),
                "names": sorted(w.name for w in ws.values()),
                "nthreads": sorted(w.nthreads for w in ws.values()),
                "has_what": sum(len(w.has_what) for w in ws.values()),
                "address": dask_scheduler.address,
                "id": dask_scheduler.id,
            }

        got = c.run_on_scheduler(look)
        info = scheduler_identity(c)
        assert got["n_mine"] == 50
        assert got["state"] == "memory"
        assert got["who_has"] and set(got["who_has"]) <= set(info["workers"])
        assert set(got["who_has_names"]) <= {"w0", "w1"}
        assert got["holder_in_workers"]
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

    async def later(dask_scheduler=None):
        await asyncio.sleep(0.2)
        dask_scheduler.later_ran = True

    with client(cluster) as c:
        assert c.run_on_scheduler(co, 7) == (7, 2)
        # wait=False: started, None returned at once, left running
        assert c.run_on_scheduler(later, wait=False) is None
        wait_for(lambda: c.run_on_scheduler(lambda dask_scheduler: getattr(dask_scheduler, "later_ran", None)),
                 10, "the coroutine started with wait=False")
        with pytest.raises(AssertionError, match="Combination not supported"):
            c.run_on_scheduler(lambda: 1, wait=False)


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


def test_dask_scheduler_members_served_by_go(cluster):
    """log_event reaches the scheduler's event log, get_task_stream and
    get_logs read the scheduler's, loop.add_callback runs on the host's loop
    from a run_on_scheduler thread, memory and identity read as distributed's."""
    with client(cluster) as c:
        # the task stream records from its first read on, as distributed's
        # TaskStreamPlugin, added by the first get_task_stream
        c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.get_task_stream())
        assert c.submit(sum, [4, 5], key="summed").result(timeout=30) == 9

        def use(dask_scheduler):
            import threading as th

            dask_scheduler.log_event("host-topic", {"hello": 1})
            stream = dask_scheduler.get_task_stream()
            logs = dask_scheduler.get_logs()
            ran = th.Event()
            dask_scheduler.loop.add_callback(ran.set)
            return {
                "stream_keys": [r["key"] for r in stream],
                "n_logs": len(logs),
                "callback_ran": ran.wait(10),
                "memory_type": type(dask_scheduler.memory).__name__,
                "identity_type": dask_scheduler.identity()["type"],
                "status": dask_scheduler.status.name,
                "total_nthreads": dask_scheduler.total_nthreads,
                "bandwidth": dask_scheduler.bandwidth,
                "managed": dask_scheduler.memory.managed,
            }

        got = c.run_on_scheduler(use)
        assert "summed" in got["stream_keys"]
        assert got["n_logs"] > 0
        assert got["callback_ran"] is True
        assert got["memory_type"] == "MemoryState"
        assert got["identity_type"] == "Scheduler"
        assert got["status"] == "running"
        assert got["total_nthreads"] == 2
        assert got["bandwidth"] > 0
        assert got["managed"] >= 0
        events = wait_for(lambda: c.get_events("host-topic") or None, 10, "the host's event")
        assert events[0][1] == {"hello": 1}


def test_retire_workers_from_the_host(tmp_path):
    """await dask_scheduler.retire_workers(...) in a coroutine function
    retires the worker through the scheduler, keeping its data."""
    with two_worker_cluster(tmp_path) as sched, Client(sched.address, timeout=60) as c:
        futs = c.map(lambda x: x + 100, range(20))
        assert c.gather(futs) == list(range(100, 120))
        victim = next(a for a, w in scheduler_workers(c).items() if w["name"] == "w0")

        async def retire(addr, dask_scheduler=None):
            return await dask_scheduler.retire_workers(workers=[addr])

        out = c.run_on_scheduler(retire, victim)
        assert victim in out
        wait_for(lambda: len(scheduler_workers(c)) == 1 or None, 30, "one worker left")
        assert c.gather(futs) == list(range(100, 120))


def test_erred_task_seen_from_the_host(cluster):
    def bad(x):
        raise ZeroDivisionError(f"bad {x}")

    with client(cluster) as c:
        f = c.submit(bad, 1, key="bad-one")
        with pytest.raises(ZeroDivisionError):
            f.result(timeout=30)

        def look(dask_scheduler):
            ts = dask_scheduler.tasks["bad-one"]
            return ts.state, ts.exception_text, ts.exception is not None, "bad" in (ts.traceback_text or "")

        state, text, has_exc, tb = c.run_on_scheduler(look)
        assert state == "erred"
        assert "bad 1" in text
        assert has_exc and tb


def test_task_graph_seen_from_the_host(cluster):
    with client(cluster) as c:
        a = c.submit(lambda: 1, key="dep-a")
        b = c.submit(lambda x: x + 1, a, key="dep-b")
        d = c.submit(lambda x, y: x + y, a, b, key="dep-c")
        assert d.result(timeout=30) == 3

        def look(dask_scheduler):
            t = dask_scheduler.tasks
            ta, tb, tc = t["dep-a"], t["dep-b"], t["dep-c"]
            held = {ts.key for ws in dask_scheduler.workers.values() for ts in ws.has_what}
            return (
                {x.key for x in tb.dependencies}, {x.key for x in ta.dependents},
                {x.key for x in tc.dependencies}, tc.prefix.name, tc.group_key,
                {"dep-a", "dep-b", "dep-c"} <= held, len(t) == len(list(t)),
            )

        deps_b, dependents_a, deps_c, prefix, group, held, n = c.run_on_scheduler(look)
        assert deps_b == {"dep-a"}
        assert dependents_a == {"dep-b", "dep-c"}
        assert deps_c == {"dep-a", "dep-b"}
        from dask.utils import key_split

        assert prefix == key_split("dep-c") and group == "dep-c"
        assert held and n


def test_periodic_callback_on_the_host_loop(cluster):
    """A run_on_scheduler function (in a thread of its own) finds the host's
    loop as IOLoop.current() and starts a PeriodicCallback on it through
    add_callback, as code written for distributed's loop does."""

    def setup(dask_scheduler):
        from tornado.ioloop import IOLoop, PeriodicCallback

        dask_scheduler.ticks = 0

        def tick():
            dask_scheduler.ticks += 1

        pc = PeriodicCallback(tick, 20)
        dask_scheduler.periodic_callbacks["test-ticks"] = pc
        IOLoop.current().add_callback(pc.start)
        return IOLoop.current() is dask_scheduler.loop

    with client(cluster) as c:
        assert c.run_on_scheduler(setup) is True
        wait_for(lambda: c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.ticks) >= 5 or None, 10,
                 "ticks of the periodic callback")
        c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.loop.add_callback(
            dask_scheduler.periodic_callbacks.pop("test-ticks").stop))


def test_forwarded_handler_values_and_errors(cluster):
    """A forwarded op's arguments and reply carry what distributed's comms
    carry (msgpack values, Serialize-d objects), and a handler that raises
    raises in the caller, as Server._handle_comm's uncaught-error does."""

    def install(dask_scheduler):
        def echo(comm, **kw):
            return {"got": kw, "tuple": (1, "a"), "bytes": b"\x00\x01", "none": None, "big": 2**62}

        def fail(x):
            raise KeyError(f"no such thing {x}")

        dask_scheduler.handlers["my_echo"] = echo
        dask_scheduler.handlers["my_fail"] = fail

    with client(cluster) as c:
        c.run_on_scheduler(install)

        async def call():
            return await c.scheduler.my_echo(a=1, b=[1.5, "x"], c={"k": None})

        out = c.sync(call)
        # msgpack lists arrive as tuples, as in distributed (use_list=False)
        assert out["got"] == {"a": 1, "b": (1.5, "x"), "c": {"k": None}}
        assert tuple(out["tuple"]) == (1, "a") and out["bytes"] == b"\x00\x01"
        assert out["none"] is None and out["big"] == 2**62

        async def bad():
            return await c.scheduler.my_fail(x=3)

        with pytest.raises(KeyError, match="no such thing 3"):
            c.sync(bad)
        # the host is still there, with its handlers
        assert c.sync(call)["big"] == 2**62
