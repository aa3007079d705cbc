"""The calls a user reaches for when something goes wrong, from a stock
Client against stock workers (each with its nanny): MemorySampler,
Client.profile, dump_cluster_state (read back with distributed's own
DumpArtefact), benchmark_hardware, call_stack, nbytes, get_task_metadata,
recreate_error_locally, Client.amm, restart_workers, and the small queries
beside them. Where the answer is deterministic, each test makes the same
calls on distributed's own scheduler (`dask scheduler`, same workers) and
compares the two answers."""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import ExitStack, contextmanager

import pytest
from dask.sizeof import sizeof
from distributed import Client, get_task_metadata
from distributed.cluster_dump import DumpArtefact
from distributed.diagnostics import MemorySampler

from cluster import GoScheduler, PyScheduler, Workers, scheduler_workers, two_worker_cluster, wait_for

pytestmark = pytest.mark.timeout(600)

KINDS = ("py", "go")
SCHEDULERS = {"py": PyScheduler, "go": GoScheduler}


class Cluster:
    def __init__(self, kind: str, sched: GoScheduler):
        self.kind = kind
        self.sched = sched

    @property
    def address(self) -> str:
        return self.sched.address

    def client(self) -> Client:
        return Client(self.sched.address, timeout=60)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """A Python and a Go scheduler, each with two stock nanny workers named
    w0 and w1, shared by the module's tests (each test uses fresh Clients
    and leaves the cluster with its two workers)."""
    with ExitStack() as stack:
        started = {}
        for kind in KINDS:
            tmp = tmp_path_factory.mktemp(f"debug-{kind}")
            started[kind] = Cluster(kind, stack.enter_context(two_worker_cluster(tmp, scheduler=SCHEDULERS[kind])))
        yield started


@contextmanager
def clients(clusters):
    """A fresh Client on each scheduler, Python's first."""
    cs = {kind: clusters[kind].client() for kind in KINDS}
    try:
        yield cs
    finally:
        for c in cs.values():
            c.close()


def inc(x):
    return x + 1


def payload(i, mib=16):
    return bytes(mib << 20)[: (mib << 20) - i]  # a distinct size per key


def busy_profiled_function(seconds):
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        n += 1
    return n


def sleepy_call_stack_function(seconds):
    time.sleep(seconds)
    return seconds


def fails_on(x):
    raise ValueError(f"bad input {x}")


# ------------------------------------------------------------ MemorySampler


def test_memory_sampler_series_has_its_points_and_rises(clusters):
    """sample(interval=0.2) for ~2 s: one point at start and one per
    interval, about the same count on both schedulers; managed memory rises
    while 8 × 16 MiB land, process memory is the workers' RSS."""
    with clients(clusters) as cs:
        counts = {}
        for kind, c in cs.items():
            ms = MemorySampler()
            t0 = time.monotonic()
            with ms.sample("managed", client=c, measure="managed", interval=0.2):
                futs = c.map(payload, range(8), key=[f"payload-{kind}-{i}" for i in range(8)])
                c.gather(futs)
                time.sleep(max(0.0, 2.0 - (time.monotonic() - t0)))
            elapsed = time.monotonic() - t0
            with ms.sample("process", client=c, interval=0.2):
                time.sleep(0.6)
            series = [b for _, b in ms.samples["managed"]]
            expected = 1 + elapsed / 0.2  # a busy machine delays ticks, never adds any
            assert 0.5 * expected <= len(series) <= expected + 1, (kind, len(series), expected)
            assert series[0] < 16 << 20 and max(series) >= 8 * (15 << 20), (kind, series)
            assert all(b > 10 << 20 for _, b in ms.samples["process"]), (kind, ms.samples["process"])
            df = ms.to_pandas()
            assert list(df.columns) == ["managed", "process"], df.columns
            counts[kind] = len(series)
            del futs
        assert abs(counts["go"] - counts["py"]) <= max(3, 0.4 * counts["py"]), counts


def test_memory_sampler_of_a_vanished_client_is_freed(clusters):
    """A client that starts a sample and leaves without stopping it leaves
    nothing behind: stopping it later is KeyError on both schedulers."""
    for kind, cl in clusters.items():
        c = cl.client()
        key = c.sync(c.scheduler.memory_sampler_start, client=c.id, measure="process", interval=0.1)
        c.close()
        time.sleep(1.0)
        with cl.client() as other:
            with pytest.raises(KeyError):
                other.sync(other.scheduler.memory_sampler_stop, key=key)


# ------------------------------------------------------------ profile


def function_names(tree) -> set[str]:
    names, stack = set(), [tree]
    while stack:
        node = stack.pop()
        names.add(node["description"]["name"])
        stack.extend(node["children"].values())
    return names


def test_profile_has_the_computation_in_its_tree(clusters):
    """client.profile() merges the workers' profiles: the function the
    tasks ran is in the tree, on both schedulers; merge_workers=False keys
    them by worker; scheduler=True answers a profile of the same shape."""
    with clients(clusters) as cs:
        for kind, c in cs.items():
            c.gather(c.map(busy_profiled_function, [1.5, 1.5], pure=False))
            prof = c.profile()
            assert "busy_profiled_function" in function_names(prof), (kind, function_names(prof))
            assert prof["identifier"] == "root" and prof["count"] > 0
            per_worker = c.profile(merge_workers=False)
            assert set(per_worker) == set(scheduler_workers(c)), (kind, per_worker.keys())
            assert sum(p["count"] for p in per_worker.values()) == prof["count"], kind
            own = c.profile(scheduler=True)
            assert set(own) == {"count", "children", "identifier", "description"}, own.keys()


def test_profile_with_a_worker_dying_mid_fan_out_returns_the_others(clusters, tmp_path):
    """A third worker (no nanny) is frozen, so the profile fan-out waits on
    it, then killed: client.profile() answers with the two others'
    profiles, on both schedulers."""
    for kind, cl in clusters.items():
        extra = Workers(tmp_path / kind)
        (tmp_path / kind).mkdir()
        try:
            proc = extra.start(cl.address, "doomed", "--no-nanny")
            with cl.client() as c:
                c.wait_for_workers(3, timeout=120)
                c.gather(c.map(busy_profiled_function, [0.6] * 3, pure=False))
                others = {a for a, w in scheduler_workers(c).items() if w["name"] != "doomed"}
                os.kill(proc.pid, signal.SIGSTOP)
                result = {}
                t = threading.Thread(target=lambda: result.update(p=c.profile(merge_workers=False)), daemon=True)
                t.start()
                time.sleep(1.0)
                assert t.is_alive(), f"{kind}: profile answered while a worker was frozen"
                os.kill(proc.pid, signal.SIGKILL)
                t.join(60)
                assert not t.is_alive(), f"{kind}: profile hangs after the worker died"
                # distributed zips every worker with the replies that came, so
                # only the count of its answer is the others'
                assert len(result["p"]) == 2, (kind, result["p"].keys())
                assert kind == "py" or set(result["p"]) == others, (result["p"].keys(), others)
        finally:
            extra.stop()


# ------------------------------------------------------------ cluster dumps


def test_dump_cluster_state_reads_back_with_dump_artefact(clusters, tmp_path):
    """The dump, written by the client (msgpack, YAML) and by the scheduler
    (a file:// URL), loads with distributed's DumpArtefact: the tasks in
    memory are the persisted keys, a key's story tells its transitions, no
    worker is missing; the same on both schedulers."""
    with clients(clusters) as cs:
        for kind, c in cs.items():
            futs = c.map(inc, range(5), key=[f"dumped-{i}" for i in range(5)])
            c.gather(futs)
            keys = {f.key for f in futs}
            paths = {
                "msgpack": (tmp_path / f"{kind}-client", {}, ".msgpack.gz"),
                "yaml": (tmp_path / f"{kind}-yaml", {"format": "yaml"}, ".yaml"),
                "scheduler": (f"file://{tmp_path}/{kind}-sched", {"write_from_scheduler": True}, ".msgpack.gz"),
            }
            for how, (path, kw, suffix) in paths.items():
                c.dump_cluster_state(str(path), **kw)
                dump = DumpArtefact.from_url(str(path).removeprefix("file://") + suffix)
                memory = {t["key"] for t in dump.scheduler_tasks_in_state("memory")}
                assert memory == keys, (kind, how, memory)
                assert {t["key"] for t in dump.worker_tasks_in_state("memory")} == keys, (kind, how)
                story = dump.scheduler_story("dumped-0")["dumped-0"]
                assert [(s[1], s[2]) for s in story][-1] == ("processing", "memory"), (kind, how, story)
                assert dump.missing_workers() == [], (kind, how)
                assert set(dump["workers"]) == set(scheduler_workers(c)), (kind, how)
            del futs


def test_dump_cluster_state_to_an_unsupported_url_says_what_to_do(clusters):
    """An fsspec URL the Go scheduler cannot write (memory://) fails naming
    write_from_scheduler=False, which works."""
    with clusters["go"].client() as c:
        with pytest.raises(NotImplementedError, match="write_from_scheduler=False"):
            c.dump_cluster_state("memory://dump", write_from_scheduler=True)


# ------------------------------------------------------------ hardware, call stacks, nbytes


def test_benchmark_hardware_has_distributeds_sizes(clusters):
    """benchmark_hardware answers disk, memory and network bandwidths for
    the same sizes as distributed's, each a positive number."""
    shapes = {}
    with clients(clusters) as cs:
        for kind, c in cs.items():
            r = c.benchmark_hardware()
            assert set(r) == {"disk", "memory", "network"}, r
            assert all(v > 0 for mode in r.values() for v in mode.values()), r
            shapes[kind] = {mode: sorted(sizes) for mode, sizes in r.items()}
    assert shapes["go"] == shapes["py"], shapes


def test_call_stack_shows_the_running_task(clusters):
    """call_stack(future) of a running task: its worker, its key, and the
    frames of the function it is in, on both schedulers."""
    with clients(clusters) as cs:
        for kind, c in cs.items():
            fut = c.submit(sleepy_call_stack_function, 4, pure=False)
            wait_for(lambda: c.processing() and any(fut.key in v for v in c.processing().values()), 30, "processing")
            time.sleep(0.5)
            stacks = c.call_stack([fut])
            (worker, frames), = stacks.items()
            assert list(frames) == [fut.key], (kind, frames)
            assert any("sleepy_call_stack_function" in line for line in frames[fut.key]), (kind, frames)
            with pytest.raises(KeyError):
                c.call_stack(keys=["no-such-key"])
            fut.result()


def test_nbytes_equals_the_workers_sizes(clusters):
    """nbytes(summary=False) is each key's sizeof as the workers measured
    it, summary=True their sums by key_split; both schedulers agree."""
    answers = {}
    with clients(clusters) as cs:
        for kind, c in cs.items():
            futs = c.map(payload, range(4), [1] * 4, key=[f"sized-{i}" for i in range(4)])
            c.gather(futs)
            held = c.run(lambda dask_worker: {k: sizeof(v) for k, v in dask_worker.data.items()})
            workers_sizes = {k: n for sizes in held.values() for k, n in sizes.items() if k.startswith("sized-")}
            nb = {k: n for k, n in c.nbytes(summary=False).items() if k.startswith("sized-")}
            assert nb == workers_sizes, (kind, nb, workers_sizes)
            assert c.nbytes(summary=True)["sized"] == sum(workers_sizes.values())
            assert c.nbytes(keys=["sized-0"], summary=False) == {"sized-0": workers_sizes["sized-0"]}
            answers[kind] = nb
            del futs
    assert answers["go"] == answers["py"], answers


# ------------------------------------------------------------ task metadata


def test_get_task_metadata_collects_final_states(clusters):
    """get_task_metadata() records the final state of the keys computed in
    its block (memory or erred) and their metadata: the same on both."""
    results = {}
    with clients(clusters) as cs:
        for kind, c in cs.items():
            with c.as_current():
                with get_task_metadata() as tm:
                    ok = c.submit(inc, 41, key="meta-ok")
                    bad = c.submit(fails_on, 1, key="meta-bad")
                    assert ok.result() == 42
                    with pytest.raises(ValueError):
                        bad.result()
            results[kind] = (tm.state, tm.metadata)
            assert tm.state == {"meta-ok": "memory", "meta-bad": "erred"}, (kind, tm.state)
    assert results["go"] == results["py"], results


def test_task_metadata_of_a_vanished_client_is_freed(clusters):
    """A client that starts a collection and leaves inside the block: the
    Go scheduler frees the collection once the client's connection is
    gone, so stopping it later finds none (distributed keeps it until the
    scheduler stops)."""
    cl = clusters["go"]
    c = cl.client()
    c.sync(c.scheduler.start_task_metadata, name="abandoned")
    c.close()
    time.sleep(2.5)  # the collection's watcher looks every second
    with cl.client() as other:
        with pytest.raises(ValueError, match="found 0"):
            other.sync(other.scheduler.stop_task_metadata, name="abandoned")


# ------------------------------------------------------------ errors rerun locally


def test_recreate_error_locally_raises_in_the_client(clusters):
    """recreate_error_locally reruns the failing task, with its
    dependency's value fetched, in the client and raises its exception;
    recreate_task_locally reruns a task that succeeded."""
    with clients(clusters) as cs:
        for kind, c in cs.items():
            dep = c.submit(inc, 1, key=f"dep-{kind}")
            bad = c.submit(fails_on, dep, key=f"bad-{kind}")
            with pytest.raises(ValueError, match="bad input 2"):
                bad.result()
            with c.as_current():  # replay's wait() uses the current client
                with pytest.raises(ValueError, match="bad input 2"):
                    c.recreate_error_locally(bad)
                assert c.recreate_task_locally(dep) == 2


# ------------------------------------------------------------ active memory manager


def test_amm_running_follows_start_and_stop(clusters):
    """Client.amm: running() follows stop() and start(), and run_once()
    drops the extra replica of a replicated key, on both schedulers."""
    with clients(clusters) as cs:
        for kind, c in cs.items():
            assert c.amm.running() is True, kind
            c.amm.stop()
            assert c.amm.running() is False, kind
            fut = c.submit(inc, 10, key=f"replicated-{kind}")
            fut.result()
            c.replicate([fut], n=2)
            assert len(c.who_has([fut])[fut.key]) == 2, kind
            time.sleep(2.5)  # a stopped manager's interval passes: nothing dropped
            assert len(c.who_has([fut])[fut.key]) == 2, kind
            c.amm.run_once()
            wait_for(lambda: len(c.who_has([fut])[fut.key]) == 1, 30, f"{kind}: run_once drops a replica")
            c.amm.start()
            assert c.amm.running() is True, kind


# ------------------------------------------------------------ restart_workers


def test_restart_workers_gives_a_new_process_under_the_same_name(clusters):
    """restart_workers(["w0"]) answers {"w0": "OK"} and w0 comes back as a
    new process (new PID, new address) under the same name; w1 is
    untouched."""
    with clients(clusters) as cs:
        for kind, c in cs.items():
            def by_name():
                pids = c.run(os.getpid)
                return {w["name"]: (a, pids.get(a)) for a, w in scheduler_workers(c).items()}

            before = by_name()
            assert c.restart_workers(["w0"]) == {"w0": "OK"}, kind
            after = by_name()
            assert set(after) == {"w0", "w1"}, (kind, after)
            assert after["w0"][1] != before["w0"][1] and after["w0"][0] != before["w0"][0], (kind, before, after)
            assert after["w1"] == before["w1"], (kind, before, after)



def test_restart_workers_past_its_timeout_raises_timeout_error(clusters, tmp_path):
    """raise_for_error=False answers the statuses; a timeout no nanny can
    meet raises TimeoutError and removes the worker, so that no old worker
    stays; the same on both schedulers. A third, disposable worker takes
    the restarts."""
    for kind, cl in clusters.items():
        (tmp_path / kind).mkdir()
        extra = Workers(tmp_path / kind)
        try:
            extra.start(cl.address, "disposable")
            with cl.client() as c:
                c.wait_for_workers(3, timeout=120)
                assert c.restart_workers(["disposable"], raise_for_error=False) == {"disposable": "OK"}, kind
                with pytest.raises(TimeoutError):
                    c.restart_workers(["disposable"], timeout=0.001)
                names = {w["name"] for w in scheduler_workers(c).values()}
                assert "disposable" not in names, (kind, names)
        finally:
            extra.stop()
            with cl.client() as c:
                wait_for(lambda: {w["name"] for w in scheduler_workers(c).values()} == {"w0", "w1"}, 60,
                         f"{kind}: back to w0 and w1")


# ------------------------------------------------------------ small queries


def test_task_status_prefix_states_dump_state_and_set_resources(clusters):
    """get_task_status and get_task_prefix_states answer as distributed's;
    dump_state is the scheduler's section of a dump; a worker's
    set_resources makes it run a task that asks for the new resource."""
    answers = {}
    with clients(clusters) as cs:
        for kind, c in cs.items():
            futs = c.map(inc, range(3), key=[f"query-{i}" for i in range(3)])
            c.gather(futs)
            status = c.sync(c.scheduler.get_task_status, keys=["query-0", "query-1", "nope"])
            prefixes = c.sync(c.scheduler.get_task_prefix_states)
            assert prefixes["query"]["memory"] == 3, (kind, prefixes)
            state = c.sync(c.scheduler.dump_state, exclude=["run_spec"])
            assert "query-0" in state["tasks"] and state["type"] == "Scheduler", kind

            async def add_gpu(dask_worker):
                await dask_worker.set_resources(GPU=1)

            w0 = next(a for a, w in scheduler_workers(c).items() if w["name"] == "w0")
            c.run(add_gpu, workers=[w0])
            g = c.submit(inc, 5, key=f"gpu-task-{kind}", resources={"GPU": 1})
            assert g.result(timeout=60) == 6
            assert list(c.who_has([g])[g.key]) == [w0], kind
            answers[kind] = (status, prefixes["query"])
            del futs
    assert answers["go"] == answers["py"], answers
