"""Scheduler plugins in the Go scheduler's Python host, with stock Clients
and stock workers: a plugin's transitions equal those Python's scheduler
reports for the same graph (counts and order per key, and the kwargs a
finished task carries), the other hooks, a plugin whose every hook raises
(every result exact, the failure logged), a plugin stuck in transition()
that costs the engine nothing and loses no event, unregistering, and a host killed with
its plugins (named in the log)."""

from __future__ import annotations

import os
import signal
import urllib.request

import pytest
from distributed import Client, wait

from cluster import PyScheduler, Workers, scheduler_workers, two_worker_cluster, wait_for
from plugins_fixture import Gated, Raising, Recorder

pytestmark = pytest.mark.timeout(300)


def inc(x):
    return x + 1


def fail(x):
    return x / 0


def raised(fut):
    """The exception's class name, read without raising it: a raised
    exception's traceback would hold the future."""
    wait([fut])
    return type(fut.exception()).__name__ if fut.status == "error" else None


@pytest.fixture(scope="module")
def go(tmp_path_factory):
    with two_worker_cluster(tmp_path_factory.mktemp("plugins-go")) as sched:
        yield sched


def plugin_state(c, name, attr):
    def read(dask_scheduler, name=name, attr=attr):
        p = dask_scheduler.plugins.get(name)
        if p is None:
            return None
        v = getattr(p, attr)
        return {k: (list(x) if isinstance(x, list) else x) for k, x in v.items()} if isinstance(v, dict) else v

    return c.run_on_scheduler(read)


def run_recorded_graph(address, prefix):
    """Registers a Recorder, runs 20 incs and their sum with explicit keys,
    releases them, waits until the plugin saw every key forgotten, and
    returns what it recorded."""
    keys = [f"{prefix}inc-{i}" for i in range(20)]
    with Client(address, timeout=60) as c:
        c.register_plugin(Recorder(prefix))
        futs = c.map(inc, range(20), key=keys)
        total = c.submit(sum, futs, key=f"{prefix}sum")
        assert total.result() == sum(range(1, 21))
        err = c.submit(fail, 1, key=f"{prefix}err")
        assert raised(err) == "ZeroDivisionError"
        c.log_event("plugin-test", {"hello": 1})
        del futs, total, err

        def done():
            tr = plugin_state(c, "recorder", "transitions")
            return tr if tr and len(tr) == 22 and all(v[-1].endswith("forgotten") for v in tr.values()) else None

        transitions = wait_for(done, 30, "the plugin seeing every key forgotten")
        kwargs = plugin_state(c, "recorder", "kwargs")
        calls = plugin_state(c, "recorder", "calls")
        started = plugin_state(c, "recorder", "started")
    return transitions, kwargs, calls, started


def test_transitions_equal_pythons(go, tmp_path):
    got = run_recorded_graph(go.address, "cmp-")
    with two_worker_cluster(tmp_path, scheduler=PyScheduler) as py:
        want = run_recorded_graph(py.address, "cmp-")
    transitions, kwargs, calls, started = got
    assert started is True
    assert sum(map(len, transitions.values())) == sum(map(len, want[0].values()))
    assert transitions == want[0]  # every key's transitions, in order
    assert transitions["cmp-sum"] == ["released->waiting", "waiting->processing", "processing->memory",
                                      "memory->forgotten"]
    assert kwargs == want[1]  # processing->memory carries TaskFinishedMsg's fields
    assert kwargs["cmp-sum:processing->memory"] == ["metadata", "nbytes", "startstops", "status", "thread", "type",
                                                    "typename", "worker"]
    assert transitions["cmp-err"] == ["released->waiting", "waiting->processing", "processing->erred",
                                      "erred->released", "released->forgotten"]
    assert "exception" in kwargs["cmp-err:processing->erred"] and "cause" in kwargs["cmp-err:processing->erred"]
    for hook in ("update_graph", "update_graph_tasks", "log_event"):
        assert calls.get(hook) == want[2].get(hook), hook
    assert calls["update_graph_tasks"] == 20 + 21 + 1  # the map, the sum with its dependencies, the failing task


def test_membership_hooks(go, tmp_path):
    with Client(go.address, timeout=60) as c:
        c.register_plugin(Recorder("member-"), name="member-recorder")
        with Client(go.address, timeout=60) as other:
            other_id = other.id
        workers = Workers(tmp_path)
        try:
            workers.start(go.address, "w-extra")
            c.wait_for_workers(3, timeout=60)
            extra = [a for a, w in scheduler_workers(c).items() if w["name"] == "w-extra"]
        finally:
            workers.stop()
        wait_for(lambda: len(scheduler_workers(c)) == 2, 60, "the extra worker leaving")

        def whom():
            v = plugin_state(c, "member-recorder", "whom")
            return v if v and extra[0] in v.get("remove_worker", []) and other_id in v.get("remove_client", []) else None

        # other clients of earlier tests may still be leaving: look for ours
        got = wait_for(whom, 30, "add/remove worker and client hooks")
        assert got["add_worker"] == extra and got["remove_worker"] == extra
        assert other_id in got["add_client"] and got["remove_client"].count(other_id) == 1
        c.unregister_scheduler_plugin("member-recorder")


def test_raising_plugin_changes_nothing(go):
    with Client(go.address, timeout=60) as c:
        c.register_plugin(Raising())
        futs = c.map(inc, range(200), key=[f"raise-{i}" for i in range(200)])
        assert c.gather(futs) == list(range(1, 201))
        assert c.submit(sum, futs).result() == sum(range(1, 201))
        wait_for(lambda: (plugin_state(c, "raising", "n") or 0) >= 600, 30, "the raising plugin called")
        go.logs_when(lambda t: "Plugin failed with exception" in t and "raising plugin:" in t)
        c.unregister_scheduler_plugin("raising")
        assert "raising" not in c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.plugins))


def metric(sched, c, name):
    port = c.scheduler_info()["services"]["dashboard"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_stuck_plugin_costs_the_engine_nothing(go, tmp_path):
    """A plugin whose transition() blocks: the computation finishes
    regardless (on Python's scheduler it would stop the scheduler), the
    events wait in the queue, and once the plugin moves on it gets them all."""
    n = 300
    gate = tmp_path / "open"
    with Client(go.address, timeout=60) as c:
        c.register_plugin(Gated(str(gate)))
        futs = c.map(inc, range(n), key=[f"gated-{i}" for i in range(n)])
        assert c.gather(futs) == list(range(1, n + 1))
        assert c.submit(sum, futs).result() == sum(range(1, n + 1))
        # the plugin is still stuck on its first event: the rest wait in Go
        assert metric(go, c, "dask_scheduler_plugin_events_queued") > 0
        del futs
        gate.write_text("")
        # the backlog (well below the queue's bound) is delivered in full:
        # each task's released->waiting, ..., memory->forgotten
        wait_for(lambda: plugin_state(c, "gated", "n") >= 4 * n, 60, "the plugin catching up")
        assert metric(go, c, "dask_scheduler_plugin_events_dropped_total") == 0
        c.unregister_scheduler_plugin("gated")


def test_unregister_unknown_plugin(go):
    with Client(go.address, timeout=60) as c:
        with pytest.raises(ValueError, match="Could not find plugin 'nope'"):
            c.unregister_scheduler_plugin("nope")


def test_host_killed_names_lost_plugins(go):
    with Client(go.address, timeout=60) as c:
        c.register_plugin(Recorder("kill-"), name="doomed-recorder")
        pid = c.run_on_scheduler(os.getpid)
        os.kill(pid, signal.SIGKILL)
        go.logs_when(lambda t: "scheduler plugins lost with the Python host" in t and "doomed-recorder" in t)
        futs = c.map(inc, range(50), key=[f"kill-{i}" for i in range(50)])
        assert c.gather(futs) == list(range(1, 51))
        # a new host starts on the next need, with no plugins
        assert c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.plugins)) == []
        assert c.run_on_scheduler(os.getpid) != pid
