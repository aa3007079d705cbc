"""The HTTP routes on the dashboard address, against a stock scheduler.

What dask's deployment tools read there (distributed/http/): /health for
Kubernetes probes, /json/*.json, /api/v1/* for the dask-kubernetes
operator's autoscaler, /metrics for Prometheus. Each answer is compared with
what a stock distributed Scheduler, built in-process in the test with the
same routes switched on, answers to the same request; /metrics is parsed with
prometheus_client's parser and checked against the scheduler's identity and
the task counts.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import dask
import pytest
from distributed import Client, LocalCluster
from prometheus_client.parser import text_string_to_metric_families

from cluster import GoScheduler, Workers, free_port, scheduler_identity, scheduler_workers, wait_for

pytestmark = pytest.mark.timeout(180)

API = "distributed.http.scheduler.api"
ROUTES_WITH_API = dask.config.get("distributed.scheduler.http.routes") + [API]
# what our binary gets: a stock Scheduler appends its missing-bokeh page to
# the configured list in place
GO_ENV = {"DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES": repr(list(ROUTES_WITH_API))}
# identity keys that only ours has: the withholding settings in force and
# work stealing's counters (scheduler/accessors.go); stock clients keep
# unknown keys
IDENTITY_EXTRAS = {"config", "stealing"}


def http(base: str, path: str, body: bytes | None = None) -> tuple[int, str, str]:
    req = urllib.request.Request(base + path, data=body, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def record(i, path):
    """A task that leaves one line per execution in path (the workers are
    processes on this machine)."""
    with open(path, "a") as f:
        f.write(f"{i}\n")
    return bytes(20_000) + str(i).encode()


def executions(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


class GoCluster:
    """The Go binary with its dashboard on a free port and stock workers."""

    def __init__(self, tmp: Path, n_workers: int, *args: str, env: dict | None = None):
        self.dash_port = free_port()
        self.sched = GoScheduler(tmp, "--dashboard-address", f"127.0.0.1:{self.dash_port}", *args, env=env)
        self.workers = Workers(tmp)
        self.n = n_workers

    def __enter__(self):
        try:
            self.sched.start()
            for i in range(self.n):
                self.workers.start(self.sched.address, f"w{i}", nthreads=2)
            with Client(self.sched.address, timeout=30) as c:
                c.wait_for_workers(self.n, timeout=60)
        except BaseException:
            self.__exit__()
            raise
        self.base = f"http://127.0.0.1:{self.dash_port}"
        return self

    def __exit__(self, *exc):
        self.workers.stop()
        self.sched.stop()


@pytest.fixture
def stock():
    """A stock distributed Scheduler in this process (LocalCluster's loop
    thread) with the API routes on and one in-process worker."""
    with dask.config.set({"distributed.scheduler.http.routes": ROUTES_WITH_API}):
        with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, host="127.0.0.1", protocol="tcp",
                          dashboard_address="127.0.0.1:0") as cluster:
            yield cluster, f"http://127.0.0.1:{cluster.scheduler.http_server.port}"


def test_json_and_api_routes_answer_as_a_stock_scheduler(tmp_path, stock):
    stock_cluster, stock_base = stock
    with GoCluster(tmp_path, 1, env=GO_ENV) as go:
        for path in ["/health", "/api/v1"]:
            ours, theirs = http(go.base, path), http(stock_base, path)
            assert ours[0] == theirs[0] == 200, path
            assert ours[2] == theirs[2], path
            assert ours[1].split(";")[0] == theirs[1].split(";")[0] == "text/plain", path

        def keys_of(base, path):
            code, ctype, body = http(base, path)
            assert code == 200 and ctype.startswith("application/json"), (base, path, code, body)
            return json.loads(body)

        ours, theirs = keys_of(go.base, "/json/counts.json"), keys_of(stock_base, "/json/counts.json")
        assert set(ours) == set(theirs)
        assert (ours["workers"], ours["cores"], ours["tasks"]) == (theirs["workers"], theirs["cores"], 0) == (1, 2, 0)

        ours, theirs = keys_of(go.base, "/json/identity.json"), keys_of(stock_base, "/json/identity.json")
        assert set(ours) - set(theirs) == IDENTITY_EXTRAS and set(theirs) <= set(ours)
        assert ours["address"] == go.sched.address and ours["services"] == {"dashboard": go.dash_port}
        (our_worker,), (their_worker,) = ours["workers"].values(), theirs["workers"].values()
        assert set(our_worker) == set(their_worker)

        ours, theirs = keys_of(go.base, "/api/v1/get_workers"), keys_of(stock_base, "/api/v1/get_workers")
        assert set(ours) == set(theirs) == {"num_workers", "workers"}
        assert [set(w) for w in ours["workers"]] == [set(w) for w in theirs["workers"]] == [{"name", "address"}]
        assert ours["workers"][0]["name"] == "w0"

        assert keys_of(go.base, "/api/v1/adaptive_target") == keys_of(stock_base, "/api/v1/adaptive_target") == {"workers": 0}
        ours, theirs = keys_of(go.base, "/api/v1/check_idle"), keys_of(stock_base, "/api/v1/check_idle")
        assert set(ours) == set(theirs) == {"idle_since"}
        assert isinstance(ours["idle_since"], float) and ours["idle_since"] <= time.time()

        # the JupyterLab extension's list: each path is a page here (stock
        # serves {} without bokeh installed)
        plots = keys_of(go.base, "/individual-plots.json")
        assert plots and all(path.startswith("/individual-") for path in plots.values())
        for path in plots.values():
            assert http(go.base, path)[0] == 200, path

        ours = json.loads(http(go.base, "/api/v1/retire_workers", b'{"n": 1}')[2])
        theirs = json.loads(http(stock_base, "/api/v1/retire_workers", b'{"n": 1}')[2])
        assert len(ours) == len(theirs) == 1
        assert set(next(iter(ours.values()))) == set(next(iter(theirs.values())))


def test_bad_requests_touch_nothing(tmp_path):
    env = GO_ENV
    with GoCluster(tmp_path, 2, env=env) as go, Client(go.sched.address) as c:
        for body in [b"{", b"[1, 2]", b'{"n": "all"}', b"\xff\xfe garbage"]:
            code, _, text = http(go.base, "/api/v1/retire_workers", body)
            assert code == 400 and "retire_workers" in text, (body, code, text)
        assert http(go.base, "/api/v1/nope")[0] == 404
        assert http(go.base, "/json/nope.json")[0] == 404
        assert len(scheduler_workers(c)) == 2


def test_api_retire_one_worker_keeps_every_key(tmp_path):
    """POST /api/v1/retire_workers {"n": 1}, as the operator's autoscaler
    does: one worker goes, and every key it held is read from the others,
    never recomputed."""
    env = GO_ENV
    log = tmp_path / "executions.txt"
    with GoCluster(tmp_path, 3, env=env) as go, Client(go.sched.address) as c:
        futures = c.map(record, range(100), path=str(log), pure=False)
        c.gather(futures)
        held = c.has_what()
        assert sum(1 for keys in held.values() if keys) >= 2, "keys all on one worker: nothing to test"
        assert executions(log) == 100

        code, _, body = http(go.base, "/api/v1/retire_workers", b'{"n": 1}')
        assert code == 200, body
        retired = json.loads(body)
        assert len(retired) == 1
        (gone,) = retired
        assert held[gone], "the retired worker held no key"
        wait_for(lambda: gone not in scheduler_workers(c), 30, "the retired worker to leave")
        assert c.gather(futures) == [bytes(20_000) + str(i).encode() for i in range(100)]
        assert executions(log) == 100, "a key of the retired worker was recomputed"


def scrape(base: str) -> dict[str, list]:
    code, ctype, text = http(base, "/metrics")
    assert code == 200 and ctype.startswith("text/plain"), (code, ctype)
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def value(samples: dict, name: str, **labels) -> float:
    found = [s.value for s in samples[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def slow_inc(x):
    time.sleep(0.02)
    return x + 1


def fails(x):
    raise ValueError(x)


def agree(base: str, expected: list[tuple], timeout: float = 15) -> dict:
    """Scrape /metrics until every (sample name, labels, value[, tolerance])
    in expected holds (the metrics read the engine's snapshot, published on its 0.5 s
    tick); fail naming each sample that still differs, with both values."""
    deadline = time.monotonic() + timeout
    while True:
        m = scrape(base)
        diff = {}
        for name, labels, want, *tol in expected:
            found = [s.value for s in m.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
            got = sum(found) if found else None
            if got is None or abs(got - want) > (tol[0] if tol else 1e-9 * max(1.0, abs(want))):
                diff[f"{name}{labels}"] = {"metrics": got, "identity/client": want}
        if not diff:
            return m
        if time.monotonic() > deadline:
            pytest.fail(f"/metrics disagrees with what the client reads, after {timeout} s: {diff}")
        time.sleep(0.2)


def cluster_truth(c: Client, base: str, clients: int) -> list[tuple[str, dict, float]]:
    """What /metrics must say of the workers and clients, from
    identity(n_workers=-1), /json/counts.json and the client side; each
    checked against a value the test set (workers started with 2 threads
    and --memory-limit 2GiB, clients opened)."""
    info = scheduler_identity(c)
    workers = info["workers"].values()
    assert info["n_workers"] == len(workers)
    assert info["total_threads"] == sum(w["nthreads"] for w in workers) == 2 * len(workers)
    assert info["total_memory"] == sum(w["memory_limit"] for w in workers) == len(workers) * 2 * 2**30
    code, _, body = http(base, "/json/counts.json")
    counts = json.loads(body)
    assert code == 200 and (counts["workers"], counts["cores"]) == (len(workers), info["total_threads"]), counts
    status = [w["status"] for w in workers]
    busy = {w for w, keys in c.processing().items() if keys}
    running = status.count("running")
    return [
        ("dask_scheduler_workers", {}, len(workers)),
        ("dask_scheduler_workers", {"state": "paused"}, status.count("paused")),
        ("dask_scheduler_workers", {"state": "retiring"}, len(workers) - running - status.count("paused")),
        ("dask_scheduler_workers", {"state": "idle"}, running - len(busy)),
        ("dask_scheduler_clients", {}, clients),
        ("dask_scheduler_desired_workers", {}, c.sync(c.scheduler.adaptive_target)),
    ]


def task_truth(c: Client, prefixes: dict[str, tuple[str, int]], erred: int) -> list[tuple[str, dict, float]]:
    """What /metrics must say of the tasks, from the client side: who_has
    (every key in memory), nbytes per prefix, the task stream's compute
    times per prefix, and the prefixes' counts the test computed."""
    in_memory = [k for k, holders in c.who_has().items() if holders]
    nbytes = c.nbytes(summary=True)
    compute: dict[str, float] = {}
    ran: dict[str, int] = {}
    for rec in c.get_task_stream():
        if rec.get("status") != "OK":
            continue  # only task-finished adds to a prefix's durations (_transition_processing_memory)
        p = dask.utils.key_split(rec["key"])
        ran[p] = ran.get(p, 0) + 1
        compute[p] = compute.get(p, 0.0) + sum(s["stop"] - s["start"] for s in rec["startstops"] if s["action"] == "compute")
    out = [
        ("dask_scheduler_tasks", {"state": "memory"}, len(in_memory)),
        ("dask_scheduler_tasks", {"state": "erred"}, erred),
        ("dask_scheduler_tasks", {"state": "processing"}, 0),
        ("dask_scheduler_tasks", {"state": "waiting"}, 0),
        ("dask_scheduler_tasks", {"state": "queued"}, 0),
        ("dask_scheduler_tasks", {"state": "no-worker"}, 0),
        ("dask_scheduler_task_groups", {}, len(prefixes)),
    ]
    for p, (state, n) in prefixes.items():
        out += [
            ("dask_scheduler_prefix_state_totals_total", {"task_prefix_name": p, "state": state}, n),
            ("dask_scheduler_tasks_output_bytes", {"task_prefix_name": p}, nbytes.get(p, 0)),
        ]
        if state == "memory":
            assert ran.get(p) == n, f"the task stream has {ran.get(p)} runs of {p}, want {n}"
            # durations are kept to the microsecond here: 1 us per task
            out.append(("dask_scheduler_tasks_compute_seconds_total", {"task_prefix_name": p}, compute[p], 1e-6 * ran[p]))
    return out


def test_metrics_agree_with_scheduler_info_and_task_counts(tmp_path):
    """Each /metrics family that has a counterpart a client can read is
    compared with it, at several points where the values change: workers
    joining and retiring, a second client, tasks computed, failed and
    released."""
    with GoCluster(tmp_path, 2) as go, Client(go.sched.address) as c:
        # the first get_task_stream installs the TaskStreamPlugin
        # (Scheduler.get_task_stream), which records every run from then on
        assert list(c.get_task_stream()) == []
        n = 400
        futures = c.map(slow_inc, range(n))
        total = c.submit(sum, futures)
        seen_processing = 0
        while not total.done():
            m = scrape(go.base)
            tasks = {s.labels["state"]: s.value for s in m["dask_scheduler_tasks"]}
            # every task of the graph is known, whatever its state, once
            # the engine has published a snapshot with the graph (a tick:
            # 0.5 s; the metrics read the snapshot, not the live state)
            assert sum(tasks.values()) in (0, n + 1), tasks
            seen_processing = max(seen_processing, tasks["processing"] + tasks.get("queued", 0))
            time.sleep(0.3)
        assert total.result() == sum(range(1, n + 1))
        assert seen_processing > 0, "no scrape saw the computation running"

        m = agree(go.base, cluster_truth(c, go.base, 1) + task_truth(c, {"slow_inc": ("memory", n), "sum": ("memory", 1)}, erred=0))
        # 400 tasks of 20 ms each: the compute times are the workers', not 0
        assert value(m, "dask_scheduler_tasks_compute_seconds_total", task_prefix_name="slow_inc") >= n * 0.02 * 0.9
        assert value(m, "dask_scheduler_tasks_output_bytes", task_prefix_name="slow_inc") > 0
        assert value(m, "dask_scheduler_tasks_forgotten_total") == 0
        assert value(m, "dask_scheduler_workers_added_total") == 2 and value(m, "dask_scheduler_workers_removed_total") == 0
        # GoCluster's own client came and went before c
        added = value(m, "dask_scheduler_client_connections_added_total")
        removed = value(m, "dask_scheduler_client_connections_removed_total")
        assert added == removed + 1
        ticks = value(m, "dask_scheduler_tick_count_total")
        assert ticks > 0
        assert value(m, "dask_scheduler_helper_processes") >= 1
        assert value(m, "dask_scheduler_helper_rss_bytes") > 10 << 20
        assert len(m["dask_stealing_request_count_total"]) == 15
        assert "go_goroutines" in m and "process_resident_memory_bytes" in m

        # a task that fails, a second client, a third worker
        bad = c.submit(fails, 1)
        assert bad.exception(timeout=30) is not None
        go.workers.start(go.sched.address, "w2", nthreads=2)
        c.wait_for_workers(3, timeout=60)
        with Client(go.sched.address) as c2:
            m = agree(go.base, cluster_truth(c, go.base, 2)
                      + task_truth(c, {"slow_inc": ("memory", n), "sum": ("memory", 1), "fails": ("erred", 1)}, erred=1)
                      + [("dask_scheduler_workers_added_total", {}, 3),
                         ("dask_scheduler_client_connections_added_total", {}, added + 1)])
        assert value(m, "dask_scheduler_tick_count_total") > ticks, "the tick counter did not move"

        # the second client gone, a worker retired, half the keys released
        (w2,) = [a for a, w in scheduler_workers(c).items() if w["name"] == "w2"]
        c.retire_workers([w2])
        wait_for(lambda: w2 not in scheduler_workers(c), 30, "w2 to retire")
        del bad
        kept = futures[: n // 2]
        del futures, total
        m = agree(go.base, cluster_truth(c, go.base, 1)
                  + [("dask_scheduler_tasks", {"state": "memory"}, len(kept)),
                     ("dask_scheduler_tasks", {"state": "erred"}, 0),
                     ("dask_scheduler_workers_removed_total", {}, 1),
                     ("dask_scheduler_client_connections_removed_total", {}, removed + 1),
                     ("dask_scheduler_tasks_forgotten_total", {}, n // 2 + 2)])  # half of slow_inc, sum, fails
        assert len([k for k, h in c.who_has().items() if h]) == len(kept)
        del kept
        m = agree(go.base, [("dask_scheduler_tasks_forgotten_total", {}, n + 2)])
        assert sum(s.value for s in m["dask_scheduler_tasks"]) == 0


# dask_* families a stock scheduler serves that ours does not, and why
# (the table in scheduler/server/web/README.md): none today; the GIL's
# contention is off by default in distributed too and has no Go meaning.
NOT_SERVED: set[str] = set()
ONLY_OURS = {
    "dask_scheduler_queued_root_tasks", "dask_scheduler_coassigned_tasks", "dask_scheduler_coassignment_runs",
    "dask_scheduler_tasks_finished", "dask_scheduler_helper_processes", "dask_scheduler_helper_rss_bytes",
    "dask_scheduler_transitions", "dask_scheduler_engine_lock_held_maximum_seconds",
    "dask_scheduler_plugin_events_queued", "dask_scheduler_plugin_events_dropped",
}


def test_metric_families_are_a_stock_schedulers(tmp_path, stock):
    """Every dask_* family a stock scheduler exposes (with a semaphore in
    use, so its families appear) is exposed here with the same type and
    label names; ours add only the documented ones."""
    from distributed import Semaphore

    stock_cluster, stock_base = stock

    def families(base):
        code, _, text = http(base, "/metrics")
        assert code == 200
        return {f.name: (f.type, sorted({k for s in f.samples for k in s.labels}))
                for f in text_string_to_metric_families(text) if f.name.startswith("dask_")}

    # a task prefix with a task in memory, so the per-prefix families have
    # samples (client_golang writes no family without one)
    with Client(stock_cluster) as c:
        with Semaphore(max_leases=2, name="sem"):
            done = c.submit(slow_inc, 1)
            assert done.result() == 2
            theirs = families(stock_base)
    with GoCluster(tmp_path, 1) as go, Client(go.sched.address) as c:
        with Semaphore(max_leases=2, name="sem"):
            done = c.submit(slow_inc, 1)
            assert done.result() == 2
            wait_for(lambda: {"dask_semaphore_max_leases", "dask_scheduler_tasks_output_bytes"} <= set(families(go.base)),
                     10, "a snapshot with the semaphore and the task")
            ours = families(go.base)
    assert set(theirs) - set(ours) == NOT_SERVED
    assert set(ours) - set(theirs) == ONLY_OURS
    for name in set(theirs) & set(ours):
        assert ours[name] == theirs[name], name
