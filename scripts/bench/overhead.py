"""Scheduler overhead, Go vs Python, in the same run:

- zero workers (bin/dask-go-zero-worker: fake workers that finish every task
  the instant it arrives) so the scheduler is the only thing working:
  100k independent tasks and a 100k-task binary tree -> tasks/s and the
  scheduler's CPU microseconds per task (psutil CPU time delta / tasks);
- stock workers: a 200k-task dask.array graph end to end -> tasks/s;
- zero workers: a 1M-task graph -> time from submit to the first
  compute-task arriving at a worker, and the scheduler's peak RSS.

Graphs are plain dicts of builtins (int, operator.add): every scheduler and
materializer can unpickle them, and a zero worker never runs them. Both
schedulers run with their default configuration (queuing, saturation 1.1).
"""

from __future__ import annotations

import operator
import os
import tempfile
import time
import traceback
from pathlib import Path

from procs import Sampler, Scheduler, Workers, ZeroWorkers, path_label, wait_for

SIZES = {  # smoke, full
    "independent": (500, 100_000),
    "tree": (500, 100_000),
    "array": (200, 200_000),
    "submit-1m": (2_000, 1_000_000),
}
ZERO_WORKERS, ZERO_THREADS = 4, 32  # many slots: queuing never starves the fake workers


def tree_graph(n_tasks: int, prefix: str) -> tuple[dict, tuple]:
    """A binary reduction tree of about n_tasks tasks: n/2 leaves (int(i))
    and n/2 - 1 additions. Returns (graph, root key)."""
    leaves = max(2, n_tasks // 2)
    dsk: dict = {(f"{prefix}-leaf", i): (int, i) for i in range(leaves)}
    level, depth = [(f"{prefix}-leaf", i) for i in range(leaves)], 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level), 2):
            key = (f"{prefix}-add-{depth}", j // 2)
            # an odd level's last key is carried up alone (add needs two)
            dsk[key] = (operator.add, *level[j:j + 2]) if j + 1 < len(level) else (int, level[j])
            nxt.append(key)
        level, depth = nxt, depth + 1
    return dsk, level[0]


def _record(benchmark: str, kind: str, tasks: int) -> dict:
    return {"benchmark": benchmark, "scheduler": kind, "tasks": tasks, "ok": False}


def _measure(rec: dict, sampler: Sampler, cpu0: tuple, wall: float) -> None:
    cpu1 = sampler.scheduler_cpu()
    rec.update(
        wall_s=wall,
        tasks_per_s=rec["tasks"] / wall,
        scheduler_cpu_s=cpu1[0] - cpu0[0],
        helper_cpu_s=max(0.0, cpu1[1] - cpu0[1]),
        cpu_us_per_task=(cpu1[0] - cpu0[0]) / rec["tasks"] * 1e6,
        helper_cpu_us_per_task=max(0.0, cpu1[1] - cpu0[1]) / rec["tasks"] * 1e6,
        scheduler_peak_rss_bytes=max(sampler.scheduler_rss),
        helper_peak_rss_bytes=max(sampler.helper_rss),
        scheduler_side_peak_rss_bytes=max(sampler.total_rss),
    )


def zero_worker_runs(kind: str, tmp: Path, smoke: bool, profile: Path | None = None) -> list[dict]:
    """Independent tasks, then a tree, on one scheduler with zero workers."""
    from distributed import Client, wait

    out = []
    sched = Scheduler(kind, {}, tmp, profile=profile).start()
    zero = ZeroWorkers(tmp, sched.scheduler_file, ZERO_WORKERS, ZERO_THREADS).start()
    try:
        with Client(scheduler_file=str(sched.scheduler_file), timeout=60) as client:
            client.wait_for_workers(ZERO_WORKERS, timeout=60)
            n = SIZES["independent"][not smoke]
            rec = _record("zero-independent", kind, n)
            out.append(rec)
            dsk = {("indep", i): (int, i) for i in range(n)}
            sampler = Sampler([], sched.proc.pid)
            cpu0 = sampler.scheduler_cpu()
            sampler.start()
            t0 = time.perf_counter()
            futures = client.get(dsk, list(dsk), sync=False)
            wait(futures, timeout=900)
            first = futures[0].result(timeout=60)
            wall = time.perf_counter() - t0
            sampler.stop()
            _measure(rec, sampler, cpu0, wall)
            bad = [f for f in futures if f.status != "finished"]
            rec["ok"] = not bad and first == 0  # a zero worker serves 0 for every key
            if not rec["ok"]:
                rec["error"] = f"{len(bad)} futures not finished, first result {first!r}"
            del futures
            zero.check_alive()

            n = SIZES["tree"][not smoke]
            dsk, root = tree_graph(n, "tree")
            rec = _record("zero-tree", kind, len(dsk))
            out.append(rec)
            sampler = Sampler([], sched.proc.pid)
            cpu0 = sampler.scheduler_cpu()
            sampler.start()
            t0 = time.perf_counter()
            value = client.get(dsk, root, sync=False).result(timeout=900)
            wall = time.perf_counter() - t0
            sampler.stop()
            _measure(rec, sampler, cpu0, wall)
            rec["ok"] = value == 0
            if not rec["ok"]:
                rec["error"] = f"tree result {value!r}, expected the zero worker's 0"
            zero.check_alive()
    finally:
        zero.stop()
        sched.stop()
    return out


def stock_array_run(kind: str, tmp: Path, smoke: bool, array_tasks: int | None = None,
                    profile: Path | None = None) -> dict:
    """A ~200k-task dask.array graph on 4 stock workers (smoke: 2, without
    nannies), end to end, after an untimed warm-up graph."""
    import dask
    import dask.array as da
    from distributed import Client

    n = (array_tasks or SIZES["array"][not smoke]) * 31 // 32
    x = da.ones((n,), chunks=1).sum()  # n chunk tasks + a tree of n / 31 additions
    tasks = len(dask.optimize(x)[0].__dask_graph__())
    rec = _record("stock-array", kind, tasks)
    n_workers = 2 if smoke else 4
    sched = Scheduler(kind, {}, tmp, profile=profile).start()
    workers = Workers(tmp, sched.scheduler_file, n_workers, 2**30, nanny=not smoke).start()
    try:
        with Client(scheduler_file=str(sched.scheduler_file), timeout=60) as client:
            client.wait_for_workers(n_workers, timeout=120)
            workers.worker_pids = list(client.run(os.getpid).values())
            client.compute(da.ones((4,), chunks=1).sum()).result(60)  # warm up, untimed
            sampler = Sampler(workers.worker_pids, sched.proc.pid)
            cpu0 = sampler.scheduler_cpu()
            sampler.start()
            t0 = time.perf_counter()
            value = client.compute(x).result(timeout=1800)
            wall = time.perf_counter() - t0
            sampler.stop()
            sched.snapshot_heap()
            _measure(rec, sampler, cpu0, wall)
            rec["ok"] = float(value) == float(n)
            if not rec["ok"]:
                rec["error"] = f"sum {value!r}, expected {n}"
    finally:
        workers.stop()
        sched.stop()
    return rec


def submit_run(kind: str, tmp: Path, smoke: bool, profile: Path | None = None) -> dict:
    """A 1M-task graph on zero workers: submit -> first compute-task at a
    worker, and the scheduler's peak RSS up to 2 s after that."""
    from distributed import Client

    dsk, root = tree_graph(SIZES["submit-1m"][not smoke], "big")
    rec = _record("submit-to-first-task", kind, len(dsk))
    sched = Scheduler(kind, {}, tmp, profile=profile).start()
    zero = ZeroWorkers(tmp, sched.scheduler_file, ZERO_WORKERS, ZERO_THREADS).start()
    try:
        with Client(scheduler_file=str(sched.scheduler_file), timeout=60) as client:
            client.wait_for_workers(ZERO_WORKERS, timeout=60)
            sampler = Sampler([], sched.proc.pid)
            cpu0 = sampler.scheduler_cpu()
            sampler.start()
            t_submit = time.time()
            future = client.get(dsk, root, sync=False)
            submit_returned = time.time() - t_submit
            first = wait_for(zero.first_task_time, 1800, "the first compute-task", zero.proc)
            time.sleep(2)
            sampler.stop()
            _measure(rec, sampler, cpu0, first - t_submit)
            rec.update(first_task_s=first - t_submit, client_submit_s=submit_returned)
            del rec["tasks_per_s"]
            client.cancel(future)
            rec["ok"] = True
    finally:
        zero.stop()
        sched.stop()
    return rec


def run_all(tmp: Path, smoke: bool, repetitions: int = 1, array_repetitions: int = 1, array_tasks: int | None = None,
            submit_repetitions: int = 1, on_record=lambda results: None, profile: Path | None = None,
            schedulers: tuple[str, ...] = ("py", "go")) -> list[dict]:
    """Every overhead benchmark for each of schedulers (go:PATH is another
    build of ours), interleaved, the order turning each repetition (py, go,
    go, py, ...): `repetitions` times the zero-worker runs,
    `array_repetitions` times the stock-array run (18 min per Python run
    here: 4 stock workers on 2 cores), `submit_repetitions` times the
    1M-task submit (minutes and GiB each on the Python scheduler).
    on_record(results so far) after each run, so that an interrupted run
    keeps what it measured."""
    results = []
    array = lambda kind, d, smoke, prof: stock_array_run(kind, d, smoke, array_tasks, prof)  # noqa: E731

    steps = [("zero", zero_worker_runs, repetitions), ("array", array, array_repetitions),
             ("submit", submit_run, submit_repetitions)]
    for label, fn, reps in steps:
        # the order turns each repetition, so neither scheduler always runs first
        for rep, kind in ((r, k) for r in range(reps) for k in (schedulers if r % 2 == 0 else schedulers[::-1])):
            name = path_label(kind)  # go:PATH names a binary
            d = Path(tempfile.mkdtemp(prefix=f"overhead-{label}-{name}-{rep}-", dir=tmp))
            try:
                prof = profile / f"{label}-{name}-{rep}" if profile else None
                got = fn(kind, d, smoke, prof)
                got = got if isinstance(got, list) else [got]
            except Exception as e:  # noqa: BLE001 - recorded and fails the exit code
                got = [{"benchmark": label, "scheduler": kind, "ok": False,
                        "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}]
                log = d / "scheduler.log"
                with (tmp / "failures.log").open("a") as f:
                    f.write(f"=== overhead {label} {kind}\n{traceback.format_exc()}\n--- scheduler\n"
                            f"{log.read_text(errors='replace')[-3000:] if log.exists() else ''}\n")
            for r in got:
                r["repetition"] = rep
            results.extend(got)
            on_record(results)
            for r in got:
                print(f"  overhead {r['benchmark']:22} {kind} rep {rep}: " + (
                    f"{r['tasks']:>8} tasks {r['wall_s']:7.2f} s {r['cpu_us_per_task']:8.1f} us/task"
                    if r["ok"] else f"FAILED {r.get('error')}"), flush=True)
    return results
