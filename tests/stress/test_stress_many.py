"""Bad input at scale: a storm of workers connecting at once
while a client computes, then all of them SIGKILLed at once; and a worker
that floods heartbeats while others work. Exact results, as in
test_stress.py; smoke scale by default, full scale (1,000 workers) through
scripts/stress.sh."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from distributed import Client, wait

import stress_tasks
from cluster import GoScheduler, scheduler_workers, stop, wait_for
from stress import Case, WorkerHosts, connections, scaled
from test_stress import stress_env

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(scaled(300, 3600))


def zero_worker() -> Path:
    """bin/dask-go-zero-worker, built now (go build is a no-op when current)."""
    binary = ROOT / "bin" / "dask-go-zero-worker"
    subprocess.run(["go", "build", "-o", str(binary), "./cmd/dask-go-zero-worker"], cwd=ROOT, check=True,
                   capture_output=True)
    return binary


def test_worker_storm_connects_then_all_killed_while_a_client_computes(tmp_path):
    """A client computes on 2 workers; a storm of workers connects at once
    (every host starts all its workers together); while tasks run on them,
    every host is SIGKILLed at once, the first 2 workers' too. The client's
    futures wait, and complete exactly once a fresh host's workers come: no
    task and no result lost."""
    hosts_n, per_host = scaled(2, 20), scaled(20, 50)
    n = hosts_n * per_host
    tasks, delay, late_n = scaled(600, 20_000), 0.1, scaled(20, 50)
    sched = GoScheduler(tmp_path, env=stress_env())
    hosts, late = WorkerHosts(tmp_path, stress_env()), WorkerHosts(tmp_path, stress_env())
    try:
        sched.start()
        case = Case(f"storm: {n} workers connect at once while a client computes, then all SIGKILLed",
                    sched.address, sched.proc.pid)
        with case, Client(sched.address, timeout=60) as c:
            hosts.start(sched.address, 2, "base")
            futs = c.map(stress_tasks.slow_inc, range(tasks), delay=delay)
            expect = [i + 1 for i in range(tasks)]
            wait_for(lambda: sum(f.status == "finished" for f in futs) >= 10, 60, "the first results")
            storm = [(hosts.launch(sched.address, per_host, f"storm{h}", "--start-batch", str(per_host)), f"storm{h}")
                     for h in range(hosts_n)]
            t0 = time.monotonic()
            for proc, prefix in storm:
                hosts.wait_ready(proc, prefix, timeout=scaled(120, 900))
            c.wait_for_workers(n + 2, timeout=scaled(120, 900))
            case.result.notes.append(f"{n} storm workers registered {time.monotonic() - t0:.1f} s after the "
                                     "last host was started")
            storm_addrs = {a for a, w in scheduler_workers(c).items() if w["name"].startswith("storm")}
            wait_for(lambda: any(c.processing(workers=list(storm_addrs)).values()), 60,
                     "tasks running on the storm's workers")
            done_at_kill = sum(f.status == "finished" for f in futs)
            hosts.kill_all()
            case.result.notes.append(f"{done_at_kill} of {tasks} tasks finished when all {n + 2} workers were killed")
            if done_at_kill >= tasks:
                case.result.fail("the kill came after the computation: it proved nothing")
            wait_for(lambda: not scheduler_workers(c), scaled(60, 600),
                     "the scheduler to notice every worker gone")
            erred = [f.key for f in futs if f.status == "error"]
            if erred:
                case.result.fail(f"{len(erred)} futures erred when their workers died: {erred[:3]}")
            late.start(sched.address, late_n, "late")
            case.result.runs += 1
            wait(futs, timeout=scaled(120, 1800))
            got = c.gather(futs, errors="skip")
            if got != expect:
                case.result.lost_or_wrong += sum(1 for g, e in zip(got, expect) if g != e) + abs(len(got) - len(expect))
            del futs
        case.settle(timeout=60)
        case.check()
    finally:
        late.stop()
        hosts.stop()
        sched.stop()


def test_heartbeat_flood_does_not_starve_other_workers(tmp_path):
    """A fake worker sends heartbeats back to back on 8 connections while
    stock workers compute graph after graph with worker-ttl at its floor
    (5 s: 10 heartbeat intervals): every result exact, no worker removed,
    and every stock worker heard from within the ttl at every check."""
    binary = zero_worker()
    stock_n, flood_s, conns = scaled(4, 8), scaled(8, 120), 8
    env = stress_env({"DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": "1s"})
    sched = GoScheduler(tmp_path, env=env)
    hosts = WorkerHosts(tmp_path, stress_env())
    flooder = None
    try:
        sched.start()
        hosts.start(sched.address, stock_n, "calm")
        port = int(sched.address.rsplit(":", 1)[1])
        # the baseline once every stock worker has its heartbeat connection
        # too (after its first heartbeat), before the flooder comes and goes
        wait_for(lambda: connections(sched.proc.pid, port)[0] >= 2 * stock_n, 30,
                 "the stock workers' heartbeat connections")
        case = Case(f"a worker floods heartbeats on {conns} connections while {stock_n} work",
                    sched.address, sched.proc.pid)
        log = tmp_path / "flooder.log"
        stalest = 0.0
        with case, Client(sched.address, timeout=60) as c:
            with open(log, "wb") as f:
                flooder = subprocess.Popen(
                    [str(binary), "--scheduler", sched.address, "--name", "flood",
                     "--heartbeat-flood", str(conns)], stdout=f, stderr=subprocess.STDOUT)
            c.wait_for_workers(stock_n + 1, timeout=60)
            calm = sorted(a for a, w in scheduler_workers(c).items() if w["name"].startswith("calm"))
            end = time.monotonic() + flood_s
            g = 0
            while time.monotonic() < end:
                futs = c.map(stress_tasks.slow_inc, range(100), delay=0.01, workers=calm, key=[f"calm{g}-{i}" for i in range(100)])
                case.result.runs += 1
                if c.gather(futs, errors="skip") != [i + 1 for i in range(100)]:
                    case.result.lost_or_wrong += 1
                del futs
                info = scheduler_workers(c)
                now = time.time()
                missing = [a for a in calm if a not in info]
                if missing:
                    case.result.fail(f"graph {g}: stock workers removed: {missing}")
                else:
                    stalest = max(stalest, max(now - info[a]["last_seen"] for a in calm))
                g += 1
            if flooder.poll() is not None:
                case.result.fail(f"the flooder exited {flooder.returncode}")
        stop(flooder, grace=10)
        sent = [int(m) for m in re.findall(r'"heartbeats":(\d+)', log.read_text(errors="replace"))]
        rate = sum(sent) / flood_s
        case.result.notes.append(f"flooder: {sum(sent)} heartbeats ({rate:.0f}/s); "
                                 f"the stalest stock worker's last_seen at a check: {stalest:.2f} s")
        removed = sched.logs().count("failed to heartbeat")
        if removed:
            case.result.fail(f"{removed} workers removed for missed heartbeats")
        if stalest > 5:
            case.result.fail(f"a stock worker went {stalest:.1f} s unheard (worker-ttl 5 s)")
        if rate < 100:
            case.result.fail(f"the flood was too weak to prove anything: {rate:.0f} heartbeats/s")
        case.settle(timeout=60)
        case.check()
    finally:
        if flooder is not None:
            stop(flooder, grace=10)
        hosts.stop()
        sched.stop()

