"""Load, soak and failure cases against the Go scheduler with stock workers
and Clients. Each case counts its runs, failures and lost or
wrong results (every result is checked exactly), and compares the
scheduler's goroutines, fds and per-task state after the case with before
it (stress.Case). Smoke scale by default; DASKGO_STRESS=full via
scripts/stress.sh."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from distributed import Client, wait

import stress_tasks
from stress_tasks import tree
from cluster import GoScheduler, Workers, python_env, scheduler_workers, stop, wait_for
from stress import FULL, Case, process_stats, rss_parts, scaled

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.timeout(scaled(300, 3600))


def stress_env(extra: dict | None = None) -> dict:
    """tests/stress on the PYTHONPATH of the scheduler's helper and the
    workers: they import stress_tasks."""
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}
    env.update(extra or {})
    return env


@pytest.fixture
def cluster(tmp_path):
    """start(n_workers, nthreads=1, env=None) -> (scheduler, workers); every
    process is stopped by PID at teardown."""
    started: list = []

    def start(n_workers: int, nthreads: int = 1, env: dict | None = None, extra_worker_args=()):
        env = stress_env(env)
        # --heap-profile: a case that does not settle dumps the goroutines
        sched = GoScheduler(tmp_path, "--heap-profile", str(tmp_path / "heap"), env=env)
        workers = Workers(tmp_path)
        started.append((sched, workers))  # before start: stopped also if it never gets ready
        sched.start()
        for i in range(n_workers):
            workers.start(sched.address, f"s{i}", *extra_worker_args, nthreads=nthreads, env=env)
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(n_workers, timeout=120)
        return sched, workers

    yield start
    for sched, workers in started:
        workers.stop()
        sched.stop()


def worker_pids(client) -> dict:
    return client.run(os.getpid)


def test_soak_computed_and_cancelled_rounds(cluster):
    """Rounds of a sum tree, computed and cancelled in turn: every computed
    sum exact, no per-task state left after each round, and the Go
    process's RSS after the last round not far above the first round's."""
    sched, _ = cluster(2)
    rounds, leaves = scaled(2, 20), scaled(1_000, 10_000)
    case = Case("soak: computed and cancelled graphs", sched.address, sched.proc.pid)
    after_round: list[float] = []
    heap_after: list[float] = []
    with case, Client(sched.address, timeout=60) as c:
        for r in range(rounds):
            dsk, root, expect = tree(leaves, f"soak{r}")
            fut = c.get(dsk, root, sync=False)
            case.result.runs += 1
            if r % 2 == 0:
                wait(fut, timeout=600)
                if fut.status != "finished":
                    case.result.fail(f"round {r}: {fut.status}")
                elif fut.result() != expect:
                    case.result.lost_or_wrong += 1
            else:
                time.sleep(0.5)
                c.cancel(fut)
            del fut
            wait_for(lambda: process_stats(sched.address)["footprint"]["per_task"] == 0, 60,
                     f"round {r}: the engine to forget the graph")
            after_round.append(rss_parts(sched.proc.pid)[0] / 2**20)
            heap_after.append(int(process_stats(sched.address)["heap_alloc"]) / 2**20)
    case.settle()
    case.result.notes.append("Go RSS after each round (MiB): " + ", ".join(f"{x:.0f}" for x in after_round))
    case.result.notes.append("Go heap allocated after each round (HeapAlloc: garbage not yet collected included; MiB): " + ", ".join(f"{x:.1f}" for x in heap_after))
    if after_round[-1] > 1.2 * after_round[0] + 64:
        case.result.fail(f"RSS grew: {after_round[0]:.0f} -> {after_round[-1]:.0f} MiB")
    case.check()


def runs_with_worker_fault(case: Case, c: Client, runs: int, n_workers: int, tasks: int, delay: float, fault) -> None:
    """Each run: a graph of slow tasks; once they run, fault(r, pid of one
    worker) strikes; the result must come back exact. Then the cluster must
    be whole again."""
    for r in range(runs):
        c.wait_for_workers(n_workers, timeout=120)
        dsk, root, expect = stress_tasks.slow_graph(tasks, f"{case.result.case[:6]}{r}", delay)
        fut = c.get(dsk, root, sync=False)
        wait_for(lambda: any(c.processing().values()), 60, "tasks to start")
        pids = worker_pids(c)
        fault(r, pids[sorted(pids)[r % len(pids)]])
        case.result.runs += 1
        try:
            if fut.result(timeout=300) != expect:
                case.result.lost_or_wrong += 1
        except Exception as e:
            case.result.fail(f"run {r}: {type(e).__name__}: {e}")
        del fut
    c.wait_for_workers(n_workers, timeout=120)  # the nannies restarted them


def test_worker_sigkill_loop(cluster):
    """A worker process SIGKILLed in the middle of every run; its nanny
    restarts it. Every run's result exact."""
    sched, _ = cluster(3)
    case = Case("worker SIGKILL loop", sched.address, sched.proc.pid)
    with case, Client(sched.address, timeout=60) as c:
        runs_with_worker_fault(case, c, scaled(2, 20), 3, 60, 0.05, lambda r, pid: os.kill(pid, signal.SIGKILL))
    case.settle()
    case.check()


def test_worker_sigstopped_past_ttl_then_resumed(cluster):
    """A worker frozen (SIGSTOP) longer than worker-ttl is restarted through
    its nanny, as distributed's check_worker_ttl does (the nanny kills the
    frozen process and starts a fresh one); if it is still there it is
    resumed (SIGCONT). Results exact; the cluster is whole again."""
    ttl = 3
    sched, _ = cluster(2, env={"DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": f"{ttl}s"})
    case = Case("worker SIGSTOPped past worker-ttl, resumed", sched.address, sched.proc.pid)

    def freeze(r, pid):
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_for(lambda: len(scheduler_workers(c)) == 1, 10 * ttl, "the frozen worker's removal")
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                case.result.notes.append(f"run {r}: the nanny killed the frozen worker")

    with case, Client(sched.address, timeout=60) as c:
        runs_with_worker_fault(case, c, scaled(1, 3), 2, 40, 0.1, freeze)
    case.settle()
    case.check()


def test_many_concurrent_clients_with_shared_keys(cluster):
    """100 stock Clients (full scale) at once, in 5 processes, each computing
    1,000 tasks of which half have the same keys in every client."""
    sched, _ = cluster(2, nthreads=2)
    clients, tasks = scaled(10, 100), scaled(100, 1_000)
    procs_n = scaled(2, 5)
    per = clients // procs_n
    case = Case(f"{clients} concurrent clients x {tasks} tasks, shared keys", sched.address, sched.proc.pid)
    with case:
        procs = [subprocess.Popen([sys.executable, str(HERE / "many_clients.py"), sched.address, str(per),
                                   str(tasks), str(1 + i * per)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=python_env(stress_env()))
                 for i in range(procs_n)]
        try:
            for p in procs:
                out, err = p.communicate(timeout=scaled(240, 1500))
                lines = out.strip().splitlines()
                if p.returncode != 0 or not lines:
                    case.result.fail(f"client process exited {p.returncode}: {err[-800:]}")
                    continue
                res = json.loads(lines[-1])
                case.result.runs += res["ok"] + res["wrong"] + len(res["errors"])
                case.result.lost_or_wrong += res["wrong"]
                for e in res["errors"]:
                    case.result.fail(e)
        finally:
            for p in procs:
                stop(p)
    case.settle(timeout=60)
    case.check()
    assert case.result.runs == clients


CLIENT_HOLDING_FUTURES = """
import sys, time
from distributed import Client
import stress_tasks
from stress_tasks import tree
c = Client(sys.argv[1], timeout=60)
dsk, root, _ = stress_tasks.slow_graph(200, sys.argv[2], 0.05)
futs = c.get(dsk, [k for k in dsk if k != root], sync=False)
while sum(f.status == "finished" for f in futs) < 20:
    time.sleep(0.05)
print("holding", flush=True)
time.sleep(3600)
"""


def test_client_killed_while_holding_futures(cluster):
    """A client process SIGKILLed while it holds futures, some finished and
    some running: the scheduler forgets them all (no per-task state), and
    another client's results stay exact."""
    sched, _ = cluster(2)
    runs = scaled(1, 10)
    case = Case("client SIGKILLed holding futures", sched.address, sched.proc.pid)
    with case, Client(sched.address, timeout=60) as c:
        for r in range(runs):
            p = subprocess.Popen([sys.executable, "-c", CLIENT_HOLDING_FUTURES, sched.address, f"held{r}"],
                                 stdout=subprocess.PIPE, text=True, env=python_env(stress_env()))
            try:
                line = p.stdout.readline()
                if line.strip() != "holding":
                    case.result.fail(f"run {r}: the holding client said {line!r}")
                    continue
                p.send_signal(signal.SIGKILL)
                p.wait(10)
                dsk, root, expect = stress_tasks.slow_graph(20, f"survivor{r}", 0.01)
                case.result.runs += 1
                if c.get(dsk, root) != expect:
                    case.result.lost_or_wrong += 1
                wait_for(lambda: process_stats(sched.address)["footprint"]["per_task"] == 0, 60,
                         "the dead client's tasks to be forgotten")
            finally:
                stop(p)
    case.settle()
    case.check()


UNPICKLE_S = 3.0  # how long the slow-to-unpickle graph keeps the helper inside it


def helper_entered(address: str, marker: Path) -> tuple[int, float] | None:
    """(PID, time) of the line a materializer helper of the scheduler at
    address wrote to marker on entering the slow unpickle, if one has."""
    helpers = {int(p) for p in process_stats(address)["helper_pids"]}
    lines = marker.read_text().splitlines() if marker.exists() else []
    for pid, t in (line.split() for line in lines):
        if int(pid) in helpers and int(pid) != os.getpid():
            return int(pid), float(t)
    return None


def test_helper_killed_mid_materialize(cluster, tmp_path):
    """The materializer helper SIGKILLed while it is inside a graph (a graph
    argument that takes 3 s to unpickle there, or a 40,000-task graph):
    the client gets a clear error or the graph completes, exactly; the next
    graph works on a new helper. Each kill is checked to have landed inside
    the graph: just before it, the scheduler still had the graph in the
    materializer (identity's footprint: pending_graphs), the future was
    pending and the helper alive; for the slow graph, the helper itself had
    written that it entered the 3 s unpickle, less than 3 s before the
    kill; for the big graph, its failure with the helper's error confirms
    the dead helper owed it. Every slow-graph kill must land mid-graph, and
    at least one big-graph kill."""
    sched, _ = cluster(2)
    runs = scaled(2, 6)
    case = Case("materializer helper SIGKILLed mid-graph", sched.address, sched.proc.pid)
    rng = random.Random(17)
    mid_graph: dict[str, list[bool]] = {"slow-unpickle": [], "big-graph": []}
    with case, Client(sched.address, timeout=60) as c:
        for r in range(runs):
            kind = "slow-unpickle" if r % 2 == 0 else "big-graph"
            if kind == "slow-unpickle":
                marker = tmp_path / f"unpickling-{r}"
                dsk = {f"slow-unpickle-{r}": (int, stress_tasks.SlowToUnpickle(UNPICKLE_S, r, str(marker)))}
                root, expect = f"slow-unpickle-{r}", r
                fut = c.get(dsk, root, sync=False)
                victim, entered = wait_for(lambda: helper_entered(sched.address, marker), 60,
                                           "a helper to enter the slow unpickle")
                time.sleep(rng.uniform(0.0, 1.5))
            else:
                dsk, root, expect = tree(20_000, f"bigtree{r}")
                fut = c.get(dsk, root, sync=False)
                # the graph reaches the materializer about a second after
                # the call (the client builds and sends it); it stays there
                # about 1.5 s
                wait_for(lambda: process_stats(sched.address)["footprint"]["pending_graphs"] > 0, 60,
                         "the big graph to reach the materializer")
                time.sleep(rng.uniform(0.0, 0.3))
                victim = int(process_stats(sched.address)["helper_pid"])
            stats = process_stats(sched.address)
            pending_at_kill, status_at_kill = int(stats["footprint"]["pending_graphs"]), fut.status
            alive_at_kill = victim in stats["helper_pids"] and psutil.pid_exists(victim)
            assert victim != os.getpid()
            os.kill(victim, signal.SIGKILL)
            killed_at = time.time()
            inside = pending_at_kill > 0 and status_at_kill == "pending" and alive_at_kill
            seen = (f"run {r} ({kind}): at the kill pending_graphs={pending_at_kill}, future {status_at_kill}, "
                    f"helper {victim} {'alive' if alive_at_kill else 'gone'}")
            if kind == "slow-unpickle":
                into = killed_at - entered
                inside = inside and into < UNPICKLE_S
                seen += f", {into:.2f} s into the {UNPICKLE_S} s unpickle"
            case.result.runs += 1
            helper_error = False
            try:
                got = fut.result(timeout=300)
                if got != expect:
                    case.result.lost_or_wrong += 1
                seen += "; completed"
            except Exception as e:
                text = f"{type(e).__name__}: {e}"
                helper_error = "materializ" in text.lower() or "helper" in text.lower()
                if not helper_error:
                    case.result.fail(f"run {r}: unclear error: {text[:300]}")
                seen += f"; {text[:160]}"
            if kind == "big-graph":
                inside = inside and helper_error
            mid_graph[kind].append(inside)
            case.result.notes.append(f"{seen}; mid-graph: {inside}")
            del fut
            new = wait_for(lambda: (p := int(process_stats(sched.address)["helper_pid"])) not in (0, victim) and p,
                           60, "a new helper")
            dsk, root, expect = tree(200, f"after{r}")
            if c.get(dsk, root) != expect:
                case.result.lost_or_wrong += 1
            if not psutil.pid_exists(new):
                case.result.fail(f"run {r}: the new helper {new} is gone")
    if not mid_graph["slow-unpickle"] or not all(mid_graph["slow-unpickle"]):
        case.result.fail(f"a slow-graph kill did not land mid-graph: {mid_graph}")
    if not any(mid_graph["big-graph"]):
        case.result.fail(f"no big-graph kill landed mid-graph: {mid_graph}")
    case.settle()
    case.check()


def garbage_connections(address: str, n: int, rng: random.Random) -> int:
    """n connections that each send one kind of bad input; returns how many
    were made. Kinds: random bytes, an absurd frame count, an absurd frame
    length, a valid length with garbage msgpack, a half-sent frame, and a
    connection that sends nothing."""
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    made = 0
    for i in range(n):
        kind = i % 6
        with socket.create_connection((host, int(port)), timeout=10) as s:
            made += 1
            try:
                if kind == 0:
                    s.sendall(rng.randbytes(rng.randint(1, 4096)))
                elif kind == 1:
                    s.sendall(struct.pack("<Q", 2**60))
                elif kind == 2:
                    s.sendall(struct.pack("<QQ", 1, 2**62))
                elif kind == 3:
                    body = rng.randbytes(64)
                    s.sendall(struct.pack("<QQ", 1, len(body)) + body)
                elif kind == 4:
                    s.sendall(struct.pack("<QQ", 1, 1000) + b"\x81")
                else:
                    time.sleep(0.05)
                s.shutdown(socket.SHUT_WR)
                s.settimeout(5)
                while s.recv(65536):
                    pass
            except OSError:
                pass  # the scheduler may reset the connection: that is an answer
    return made


def test_garbage_and_absurd_lengths_while_clients_work(cluster):
    """Bad connections keep arriving while a client computes graph after
    graph: every result exact, and the bad connections leave nothing open."""
    import threading

    sched, _ = cluster(2)
    graphs, bad = scaled(4, 40), scaled(60, 3_000)
    case = Case("garbage and absurd lengths on the port while clients work", sched.address, sched.proc.pid)
    made = []
    with case, Client(sched.address, timeout=60) as c:
        t = threading.Thread(target=lambda: made.append(garbage_connections(sched.address, bad, random.Random(5))))
        t.start()
        try:
            for g in range(graphs):
                dsk, root, expect = tree(300, f"busy{g}")
                case.result.runs += 1
                if c.get(dsk, root) != expect:
                    case.result.lost_or_wrong += 1
        finally:
            t.join(600)
    case.settle()
    case.result.notes.append(f"{made[0] if made else 0} bad connections")
    if not made or made[0] != bad:
        case.result.fail(f"only {made} of {bad} bad connections were made")
    case.check()


def double(x):
    return 2 * x


def test_fan_out_beyond_the_pool_limit(tmp_path):
    """More workers than the scheduler's connection pool may hold open
    (distributed.scheduler.connection-limit lowered to 8): gather,
    Client.run, replicate and retire_workers (all workers but one, whose
    keys all move to the last) each touch every worker, and every one
    completes with exact results and no key lost."""
    from stress import WorkerHosts

    hosts_n, per_host = scaled(3, 5), scaled(10, 40)
    n = hosts_n * per_host
    sched = GoScheduler(tmp_path, env=stress_env({"DASK_DISTRIBUTED__SCHEDULER__CONNECTION_LIMIT": "8"}))
    hosts = WorkerHosts(tmp_path, stress_env())
    try:
        sched.start()
        for h in range(hosts_n):
            hosts.start(sched.address, per_host, f"fan{h}")
        case = Case(f"fan-out to {n} workers through a pool of 8 connections", sched.address, sched.proc.pid)
        with case, Client(sched.address, timeout=60) as c:
            c.wait_for_workers(n, timeout=120)
            workers = sorted(scheduler_workers(c))
            futs = [c.submit(double, i, workers=[w], pure=False) for i, w in enumerate(workers)]
            expect = [2 * i for i in range(n)]

            def check(what, ok):
                case.result.runs += 1
                if not ok:
                    case.result.fail(what)

            check("gather from every worker", c.gather(futs) == expect)
            pids = c.run(os.getpid)
            check(f"Client.run answered by {len(pids)} of {n} workers", sorted(pids) == workers)
            c.replicate(futs, n=2)
            holders = c.who_has(futs)
            check("replicate: every key on two workers", all(len(holders[f.key]) == 2 for f in futs))
            # all but one: every retiree is touched, and the one left receives every key
            retired = c.retire_workers(workers[:-1])
            check(f"retire_workers retired {len(retired)} of {n - 1}", sorted(retired) == workers[:-1])
            check("every key readable after retirement", c.gather(futs) == expect)
            holders = c.who_has(futs)
            check("no key on a retired worker", not any(set(holders[f.key]) & set(retired) for f in futs))
            del futs
        case.settle(timeout=60)
        case.check()
        assert "pool of 8 connections is full" not in sched.logs()
    finally:
        hosts.stop()
        sched.stop()
