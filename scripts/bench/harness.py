"""Benchmarks side by side: the Python scheduler and the Go scheduler, on
the same workloads, stock workers and stock Client.

    scripts/bench.sh                 # full run: fresh cluster per run, 3 interleaved repetitions
    scripts/bench.sh --smoke         # tiny sizes, 1 repetition, one cluster per configuration
    scripts/bench.sh --workloads basic-sum --configs go-queuing --repetitions 1 --no-overhead
    scripts/bench.sh --workloads graph-path   # the graph path only (scripts/bench/graph_path.py)
    scripts/bench.sh --workloads waiting      # what the scheduler holds per waiting task (scripts/bench/waiting.py)
    scripts/bench.sh --workloads stealing     # work stealing on and off, Go and Python (scripts/bench/stealing.py)
    scripts/bench.sh --workloads latency      # round trips of small computations (scripts/bench/latency.py)
    scripts/bench.sh --workloads debug-dump   # a 100k-task cluster dump while another client works (scripts/bench/debug_dump.py)
    scripts/bench.sh --workloads dask-tests   # dask's array tests through each scheduler (scripts/bench/dask_tests.py)
    scripts/bench.sh --workloads many-workers # 2 to 1,000 stock workers on one scheduler (scripts/bench/many_workers.py)
    scripts/bench.sh --workloads faults       # SIGSTOPped workers and clients: another client's round trip (scripts/bench/faults.py)
    scripts/bench.sh --workloads many-connections  # 10,000 fake workers held 10 min (scripts/bench/many_connections.py)

For every (workload, configuration, repetition) it records wall time, each
worker process's RSS every 100 ms (psutil, from outside), the peak of their
sum and the largest single worker's own peak, bytes transferred and
spilled (workers' own counters, see workloads.worker_counters), the scheduler's CPU seconds and peak RSS (and
separately those of the Go scheduler's materializer helper). Results go to
--results (default scripts/bench/results; smoke: a temporary directory):
latest.json, timeseries.json, overhead.json, latest.md and PNG plots.
Exits non-zero if any run failed or a checksum was wrong.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dask_tests  # noqa: E402
import faults  # noqa: E402
import debug_dump  # noqa: E402
import graph_path  # noqa: E402
import latency  # noqa: E402
import many_connections  # noqa: E402
import many_workers  # noqa: E402
import overhead  # noqa: E402
import stealing  # noqa: E402
import waiting  # noqa: E402
import report  # noqa: E402
from procs import (BENCH, CONFIGS, DIAGNOSTIC_CONFIGS, Sampler, Scheduler, Workers, known_config,  # noqa: E402
                   path_label, resolve_config)
from workloads import WORKLOADS, Context, warm_up, worker_counters  # noqa: E402


class Cluster:
    """A fresh scheduler of one configuration, n stock workers and a Client."""

    def __init__(self, config: str, tmp: Path, n_workers: int, memory_limit: int, nanny: bool = True,
                 extra_env: dict | None = None):
        kind, env = resolve_config(config)
        self.config, self.tmp = config, tmp
        self.scheduler = Scheduler(kind, {**env, **(extra_env or {})}, tmp)
        self.workers = Workers(tmp, self.scheduler.scheduler_file, n_workers, memory_limit, nanny=nanny)
        self.n_workers = n_workers
        self.client = None

    def __enter__(self) -> "Cluster":
        from distributed import Client

        try:
            self.scheduler.launch()
            self.workers.start()  # they wait for the scheduler file: both start up at once
            self.scheduler.wait_ready()
            self.client = Client(scheduler_file=str(self.scheduler.scheduler_file), timeout=60)
            self.client.wait_for_workers(self.n_workers, timeout=120)
            pids = self.client.run(os.getpid)
            self.workers.worker_pids = list(pids.values())
            self.client.run(warm_up)
            import dask.array as da

            self.client.compute(da.ones((4,), chunks=1).sum()).result(60)  # a first graph, untimed
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.client is not None:
            try:
                self.client.close(timeout=10)
            except Exception:  # noqa: BLE001 - teardown goes on regardless
                pass
        self.workers.stop()
        self.scheduler.stop()

    def logs(self) -> str:
        return f"--- scheduler\n{self.scheduler.logs()}\n{self.workers.logs()}"


def counters(client) -> dict:
    per_worker = client.run(worker_counters)
    return {k: sum(w[k] for w in per_worker.values()) for k in ("transferred", "spilled")}


def run_workload(cluster: Cluster, name: str, ctx: Context, rep: int, timeout: float) -> tuple[dict, dict]:
    """One timed run on a running cluster: returns (record, timeseries)."""
    rec = {"workload": name, "configuration": cluster.config, "repetition": rep, "ok": False}
    series: dict = {}
    try:
        prepared = WORKLOADS[name](ctx)
        rec.update(data_bytes=prepared.data_bytes, chunks=prepared.chunks, description=prepared.describe())
        client = cluster.client
        before = counters(client)
        sampler = Sampler(cluster.workers.worker_pids, cluster.scheduler.proc.pid)
        cpu0, helper0 = sampler.scheduler_cpu()
        sampler.start()
        t0 = time.perf_counter()
        try:
            value = prepared.run(client, timeout)
        finally:
            wall = time.perf_counter() - t0
            sampler.stop()
        cpu1, helper1 = sampler.scheduler_cpu()
        after = counters(client)
        rec.update(
            wall_s=wall,
            peak_memory_bytes=max(sampler.worker_rss),
            peak_worker_memory_bytes=sampler.largest_worker_peak(),
            transferred_bytes=after["transferred"] - before["transferred"],
            spilled_bytes=after["spilled"] - before["spilled"],
            scheduler_cpu_s=cpu1 - cpu0,
            scheduler_peak_rss_bytes=max(sampler.scheduler_rss),
            helper_cpu_s=max(0.0, helper1 - helper0),
            helper_peak_rss_bytes=max(sampler.helper_rss),
            scheduler_side_peak_rss_bytes=max(sampler.total_rss),
            checksum=value,
        )
        series = {"t": [round(t, 3) for t in sampler.times], "worker_rss": sampler.worker_rss,
                  "per_worker_rss": sampler.per_worker_rss, "scheduler_rss": sampler.scheduler_rss}
        problem = prepared.check(value)
        rec["ok"] = problem is None
        if problem:
            rec["error"] = f"wrong result: {problem}"
    except Exception as e:  # noqa: BLE001 - recorded, reported, and fails the exit code
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
    return rec, series


def check_consistency(records: list[dict]) -> None:
    """Every configuration must produce the checksum of the first one that
    succeeded (same seeded data, same graph)."""
    reference: dict[str, float] = {}
    for rec in records:
        if not rec["ok"]:
            continue
        ref = reference.setdefault(rec["workload"], rec["checksum"])
        if not math.isclose(rec["checksum"], ref, rel_tol=1e-6, abs_tol=1e-9):
            rec["ok"] = False
            rec["error"] = f"wrong result: checksum {rec['checksum']!r} differs from {ref!r}"


def log_run(rec: dict) -> None:
    if rec["ok"]:
        print(f"  {rec['workload']:19} {rec['configuration']:20} rep {rec['repetition']}: "
              f"{rec['wall_s']:7.2f} s  peak {rec['peak_memory_bytes'] / 2**30:6.2f} GiB  "
              f"sched cpu {rec['scheduler_cpu_s']:6.2f} s", flush=True)
    else:
        print(f"  {rec['workload']:19} {rec['configuration']:20} rep {rec['repetition']}: FAILED "
              f"{rec.get('error')}", flush=True)


def run_matrix(args, ctx: Context, tmp: Path, checkpoint=lambda records, series: None) -> tuple[list[dict], dict]:
    records, series = [], {}

    def keep(cluster, rec, ts):
        records.append(rec)
        series[f"{rec['workload']}|{rec['configuration']}|{rec['repetition']}"] = ts
        log_run(rec)
        checkpoint(records, series)
        if not rec["ok"]:
            (tmp / "failures.log").open("a").write(
                f"=== {rec['workload']} {rec['configuration']}\n{rec.get('traceback', '')}\n{cluster.logs()}\n")

    if args.reuse_cluster:  # smoke: one cluster per configuration, every workload on it
        for config in args.configs:
            pending = list(args.workloads)
            while pending:
                d = Path(tempfile.mkdtemp(prefix=f"{path_label(config)}-", dir=tmp))
                t0 = time.perf_counter()
                with Cluster(config, d, args.workers, args.memory_limit, nanny=not args.smoke) as cluster:
                    print(f"  {config}: cluster up in {time.perf_counter() - t0:.1f} s", flush=True)
                    while pending:
                        rec, ts = run_workload(cluster, pending.pop(0), ctx, 0, args.timeout)
                        keep(cluster, rec, ts)
                        if not rec["ok"]:
                            break  # the cluster may be broken: a fresh one for the rest
        return records, series
    for name in args.workloads:
        for rep in range(args.repetitions):
            for config in args.configs:  # interleaved: A B C D E, A B C D E, ...
                d = Path(tempfile.mkdtemp(prefix=f"{name}-{path_label(config)}-{rep}-", dir=tmp))
                try:
                    with Cluster(config, d, args.workers, args.memory_limit) as cluster:
                        rec, ts = run_workload(cluster, name, ctx, rep, args.timeout)
                        keep(cluster, rec, ts)
                except Exception as e:  # noqa: BLE001 - a cluster that did not start
                    rec = {"workload": name, "configuration": config, "repetition": rep, "ok": False,
                           "error": f"cluster: {type(e).__name__}: {e}"}
                    records.append(rec)
                    log_run(rec)
    return records, series


def describe_machine(args) -> dict:
    return {
        "command": " ".join(["scripts/bench.sh", *sys.argv[1:]]),
        "machine": f"{platform.node()} {platform.machine()} {psutil.cpu_count()} CPUs, "
                   f"{psutil.virtual_memory().total / 2**30:.1f} GiB RAM, {platform.platform()}",
        "python": platform.python_version(),
        "workers": args.workers, "memory_limit_bytes": args.memory_limit, "scale": args.scale,
        "repetitions": args.repetitions, "smoke": args.smoke,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def parse_args(argv=None):
    from dask.utils import parse_bytes

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, 1 repetition, < 2 min")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset")
    ap.add_argument("--repetitions", type=int, default=None, help="default 3 (smoke: 1)")
    ap.add_argument("--workers", type=int, default=None, help="stock workers, 1 thread each (default 4; smoke 2)")
    ap.add_argument("--memory-limit", default="1GiB", help="per worker (default 1GiB)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every workload's size")
    ap.add_argument("--timeout", type=float, default=None, help="per run, seconds (default 900; smoke 60)")
    ap.add_argument("--results", type=Path, default=None, help="output directory")
    ap.add_argument("--reuse-cluster", action="store_true", help="one cluster per configuration (smoke does)")
    ap.add_argument("--no-overhead", action="store_true", help="skip the scheduler-overhead benchmarks")
    ap.add_argument("--overhead-only", action="store_true", help="only the scheduler-overhead benchmarks")
    ap.add_argument("--array-repetitions", type=int, default=1,
                    help="repetitions of the 200k-task stock-array benchmark (default 1: 18 min per Python run)")
    ap.add_argument("--array-tasks", type=int, default=None,
                    help="size of the stock-array benchmark (default about 200k tasks; 4 ms per task here)")
    ap.add_argument("--submit-repetitions", type=int, default=1,
                    help="repetitions of the 1M-task submit benchmark (default 1: minutes and GiB on Python)")
    ap.add_argument("--overhead-schedulers", default="py,go",
                    help="schedulers of the overhead benchmarks, interleaved in this order (default py,go; "
                         "go:PATH is another build of ours, for an A/B with zero workers, where stock workers' "
                         "noise is not in the figures)")
    ap.add_argument("--graph-path-cases", default=",".join(graph_path.DEFAULT_CASES),
                    help=f"with --workloads graph-path: cases of {', '.join(graph_path.CASES)}")
    ap.add_argument("--waiting-cases", default=",".join(waiting.DEFAULT_CASES),
                    help=f"with --workloads waiting: cases of {', '.join(waiting.CASES)}")
    ap.add_argument("--stealing-cases", default=",".join(stealing.DEFAULT_CASES),
                    help=f"with --workloads stealing: cases of {', '.join(stealing.CASES)}")
    ap.add_argument("--stealing-configs", default=",".join(stealing.DEFAULT_CONFIGS),
                    help=f"with --workloads stealing: configurations of {', '.join(stealing.CONFIGS)}")
    ap.add_argument("--faults-cases", default=",".join(faults.DEFAULT_CASES),
                    help=f"with --workloads faults: cases of {', '.join(faults.CASES)}")
    ap.add_argument("--latency-cases", default=",".join(latency.DEFAULT_CASES),
                    help=f"with --workloads latency: cases of {', '.join(latency.CASES)}")
    ap.add_argument("--latency-pause-ms", type=float, default=0.0,
                    help="with --workloads latency: an untimed pause before each timed call (25: calls as typed)")
    ap.add_argument("--latency-schedulers", default="py,go",
                    help="with --workloads latency: which schedulers (go:PATH another build of ours)")
    ap.add_argument("--debug-dump-cases", default=",".join(debug_dump.DEFAULT_CASES),
                    help=f"with --workloads debug-dump: cases of {', '.join(debug_dump.CASES)}")
    ap.add_argument("--debug-dump-schedulers", default="go",
                    help="with --workloads debug-dump: which schedulers (default go; py dumps 100k tasks in minutes)")
    ap.add_argument("--many-workers-sizes", default=",".join(map(str, many_workers.DEFAULT_SIZES)),
                    help="with --workloads many-workers: numbers of workers (smoke: "
                         f"{','.join(map(str, many_workers.SMOKE_SIZES))})")
    ap.add_argument("--many-workers-idle", type=float, default=None,
                    help="with --workloads many-workers: idle window, seconds (default 30; smoke 3)")
    ap.add_argument("--many-workers-map", type=int, default=None,
                    help="with --workloads many-workers: tasks of the client.map (default 20000; smoke 500)")
    ap.add_argument("--many-workers-schedulers", default="py,go,floor",
                    help="with --workloads many-workers: which schedulers (default py,go,floor; floor: the "
                         "machine's floor for the idle phase's heartbeats, scripts/bench/heartbeat_floor.py; "
                         "go alone is for profiling)")
    ap.add_argument("--many-workers-merge", type=Path, action="append", default=[],
                    help="with --workloads many-workers: a many-workers.json of an earlier invocation whose runs "
                         "join this one's tables (repeatable)")
    ap.add_argument("--many-connections-workers", type=int, default=None,
                    help="with --workloads many-connections: fake workers (default 10000; smoke 200)")
    ap.add_argument("--many-connections-hold", type=float, default=None,
                    help="with --workloads many-connections: seconds held once registered (default 600; smoke 10)")
    ap.add_argument("--many-connections-procs", type=int, default=None,
                    help="with --workloads many-connections: zero-worker processes (default 5; smoke 1)")
    ap.add_argument("--many-connections-poll", type=float, default=None,
                    help="with --workloads many-connections: seconds between samples (default 30; smoke 5)")
    ap.add_argument("--many-connections-hb-conns", type=int, default=20,
                    help="with --workloads many-connections: shared heartbeat connections per process (default 20)")
    ap.add_argument("--many-connections-repetitions", type=int, default=1,
                    help="with --workloads many-connections: runs (default 1: each holds for minutes)")
    ap.add_argument("--dask-tests-files", default=",".join(dask_tests.DEFAULT_FILES),
                    help="with --workloads dask-tests: test files of dask/array/tests")
    ap.add_argument("--profile", type=Path, default=None,
                    help="write the Go scheduler's CPU and heap profiles and the helper's cProfile of each "
                         "graph-path, waiting and stock-array run into this directory (DIR/CASE-KIND-REP/; "
                         "heap.pprof.1 is taken at the end of the measured window)")
    ap.add_argument("--graph-path-schedulers", default="py,go",
                    help="with --workloads graph-path: which schedulers (default py,go; go alone is for profiling, "
                         "its results have no ratios; go:PATH is the Go binary at PATH, to compare two builds)")
    ap.add_argument("--waiting-schedulers", default="py,go",
                    help="with --workloads waiting: which schedulers (default py,go; go:PATH is the Go binary at PATH)")
    ap.add_argument("--graph-path-1m-python", action="store_true",
                    help="also run tree-1m once on the Python scheduler (many minutes)")
    args = ap.parse_args(argv)
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.graph_path = pick_cases(ap, args, graph_path, "graph_path_cases")
    args.waiting = pick_cases(ap, args, waiting, "waiting_cases")
    args.stealing = pick_cases(ap, args, stealing, "stealing_cases")
    args.latency = pick_cases(ap, args, latency, "latency_cases")
    args.faults = pick_cases(ap, args, faults, "faults_cases")
    args.debug_dump = pick_cases(ap, args, debug_dump, "debug_dump_cases")
    args.dask_tests = dask_tests.NAME in args.workloads
    args.many_connections = many_connections.NAME in args.workloads
    if args.many_connections:
        args.workloads.remove(many_connections.NAME)
        args.no_overhead = args.no_overhead or not args.workloads
        for attr, full, smoke in (("workers", 10_000, 200), ("hold", 600.0, 10.0), ("procs", 5, 1), ("poll", 30.0, 5.0)):
            if getattr(args, f"many_connections_{attr}") is None:
                setattr(args, f"many_connections_{attr}", smoke if args.smoke else full)
    args.many_workers = many_workers.NAME in args.workloads
    if args.many_workers:
        args.workloads.remove(many_workers.NAME)
        args.no_overhead = args.no_overhead or not args.workloads
        smoke_sizes = ",".join(map(str, many_workers.SMOKE_SIZES))
        default_sizes = ",".join(map(str, many_workers.DEFAULT_SIZES))
        sizes = smoke_sizes if args.smoke and args.many_workers_sizes == default_sizes else args.many_workers_sizes
        args.many_workers_sizes = [int(n) for n in sizes.split(",") if n]
        if args.many_workers_idle is None:
            args.many_workers_idle = 3.0 if args.smoke else 30.0
        if args.many_workers_map is None:
            args.many_workers_map = 500 if args.smoke else 20_000
    if args.dask_tests:
        args.workloads.remove(dask_tests.NAME)
        args.no_overhead = args.no_overhead or not args.workloads
    args.stealing_configs = [c for c in args.stealing_configs.split(",") if c]
    for c in args.stealing_configs:
        if c not in stealing.CONFIGS:
            ap.error(f"unknown stealing configuration {c!r}; known: {', '.join(stealing.CONFIGS)}")
    args.configs = [c for c in args.configs.split(",") if c]
    for w in args.workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r}; known: {', '.join(WORKLOADS)}")
    for c in args.configs:
        if not known_config(c):  # diagnostics: run them into their own --results
            ap.error(f"unknown configuration {c!r}; known: {', '.join([*CONFIGS, *DIAGNOSTIC_CONFIGS])}, each also as NAME-seedN")
    args.memory_limit = parse_bytes(args.memory_limit)
    if args.repetitions is None:  # 0 is allowed: e.g. the stock-array run alone (--overhead-only)
        args.repetitions = 1 if args.smoke else 3
    args.workers = args.workers or (2 if args.smoke else 4)
    args.timeout = args.timeout or (60 if args.smoke else 900)
    args.reuse_cluster = args.reuse_cluster or args.smoke
    return args


def pick_cases(ap, args, module, attr: str) -> bool:
    """Whether module.NAME (graph-path, waiting) was asked for in
    --workloads; if so, it leaves the workload list and args.<attr> becomes
    its list of cases, checked against module.CASES. Asked for alone, it
    runs without the workload matrix and the overhead runs."""
    if module.NAME not in args.workloads:
        return False
    args.workloads.remove(module.NAME)
    setattr(args, attr, [c for c in getattr(args, attr).split(",") if c])
    for c in getattr(args, attr):
        if c not in module.CASES:
            ap.error(f"unknown {module.NAME} case {c!r}; known: {', '.join(module.CASES)}")
    if not args.workloads:
        args.no_overhead = True
    return True


def main(argv=None) -> int:
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so every `with Cluster` stops its processes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = args.results or (Path(tempfile.mkdtemp(prefix="bench-smoke-")) if args.smoke else BENCH / "results")
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-run-"))
    ctx = Context(memory=args.workers * args.memory_limit, nthreads=args.workers, smoke=args.smoke,
                  scale=args.scale)
    machine = describe_machine(args)
    print(f"results: {out}\nmachine: {machine['machine']}", flush=True)
    if args.workloads:
        print(f"cluster: {args.workers} workers x 1 thread, {args.memory_limit / 2**30:.2f} GiB each", flush=True)
    if args.graph_path:
        print(f"graph path: {graph_path.WORKERS} workers x {graph_path.THREADS} threads with nannies", flush=True)
    started = time.perf_counter()
    records, series, over, paths = [], {}, [], []
    if args.graph_path:
        paths = graph_path.run_all(
            tmp, args.graph_path_cases, args.repetitions, args.smoke, args.graph_path_1m_python,
            timeout=args.timeout * 4, on_record=lambda r: graph_path.write(out, r, machine), profile=args.profile,
            schedulers=tuple(s for s in args.graph_path_schedulers.split(",") if s))
        graph_path.write(out, paths, machine)
    if args.waiting:
        waits = waiting.run_all(tmp, args.waiting_cases, args.repetitions, args.smoke, timeout=args.timeout * 2,
                                on_record=lambda r: waiting.write(out, r, machine), profile=args.profile,
                                schedulers=tuple(s for s in args.waiting_schedulers.split(",") if s))
        waiting.write(out, waits, machine)
        paths += waits
    if args.stealing:
        steals = stealing.run_all(tmp, args.stealing_cases, args.stealing_configs, args.repetitions, args.smoke,
                                  timeout=args.timeout, on_record=lambda r: stealing.write(out, r, machine))
        stealing.write(out, steals, machine)
        paths += steals
    if args.latency:
        lat = latency.run_all(tmp, args.latency_cases, args.repetitions, args.smoke, timeout=args.timeout,
                              on_record=lambda r: latency.write(out, r, machine),
                              schedulers=tuple(k for k in args.latency_schedulers.split(",") if k),
                              pause_ms=args.latency_pause_ms)
        latency.write(out, lat, machine)
        paths += lat
    if args.faults:
        fl = faults.run_all(tmp, args.faults_cases, args.repetitions, args.smoke, timeout=args.timeout,
                            on_record=lambda r: faults.write(out, r, machine))
        faults.write(out, fl, machine)
        paths += fl
    if args.debug_dump:
        dd_out = args.results or BENCH / "results" / "debug-ops"
        dumps = debug_dump.run_all(tmp, args.debug_dump_cases, args.repetitions, args.smoke, timeout=args.timeout,
                                   on_record=lambda r: debug_dump.write(dd_out, r, machine),
                                   schedulers=tuple(k for k in args.debug_dump_schedulers.split(",") if k))
        debug_dump.write(dd_out, dumps, machine)
        paths += dumps
    if args.many_workers:
        mw = many_workers.run_all(
            tmp, args.many_workers_sizes, args.repetitions, args.many_workers_idle, args.many_workers_map,
            timeout=args.timeout, on_record=lambda r: many_workers.write(out, r, machine, args.many_workers_merge),
            profile=args.profile, schedulers=tuple(k for k in args.many_workers_schedulers.split(",") if k))
        many_workers.write(out, mw, machine, args.many_workers_merge)
        paths += mw
    if args.many_connections:
        mc = many_connections.run_all(
            tmp, args.many_connections_workers, args.many_connections_procs, args.many_connections_hold,
            args.many_connections_poll, args.many_connections_hb_conns, args.many_connections_repetitions,
            on_record=lambda r: many_connections.write(out, r, machine), profile=args.profile)
        many_connections.write(out, mc, machine)
        paths += mc
    if args.dask_tests:
        files = [f for f in args.dask_tests_files.split(",") if f]
        runs = dask_tests.run_all(tmp, files[:1] if args.smoke else files, ["py", "go"], 0 if args.smoke else 5)
        dask_tests.write(out, runs, machine)
        bad = dask_tests.regressions(runs)
        paths += [{**r, "case": "dask-tests"} for r in runs]
        if bad:
            paths.append({"ok": False, "case": "dask-tests", "scheduler": "go",
                          "error": f"{len(bad)} tests pass on Python's scheduler and fail on ours: {bad[:5]}"})
    if not args.overhead_only and args.workloads:
        records, series = run_matrix(
            args, ctx, tmp, lambda r, s: report.write(out, r, s, [], machine, with_plots=False))
        check_consistency(records)
    if not args.no_overhead:
        over = overhead.run_all(
            tmp, smoke=args.smoke, repetitions=args.repetitions, array_repetitions=args.array_repetitions,
            array_tasks=args.array_tasks,
            submit_repetitions=args.submit_repetitions,
            on_record=lambda o: report.write(out, records, series, o, machine, with_plots=False),
            profile=args.profile, schedulers=tuple(k for k in args.overhead_schedulers.split(",") if k))
    if records or over:
        report.write(out, records, series, over, machine)
    failed = [r for r in records + over + paths if not r["ok"]]
    print(f"\n{len(records)} workload runs, {len(over)} overhead runs, {len(failed)} failed, "
          f"{time.perf_counter() - started:.0f} s; results in {out}", flush=True)
    for r in failed:
        print(f"FAILED {r.get('workload') or r.get('benchmark') or r.get('case')} "
              f"{r.get('configuration') or r.get('scheduler')}: "
              f"{r.get('error')}", flush=True)
    if failed and (tmp / "failures.log").exists():
        print(f"logs of failed runs: {tmp / 'failures.log'}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
