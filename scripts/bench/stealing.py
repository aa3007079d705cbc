"""Work stealing: the Go scheduler and the Python scheduler, each with
stealing on and off, on the imbalances stealing exists for.

    scripts/bench.sh --workloads stealing [--repetitions 3] [--stealing-cases late-joiner,skewed,slow-worker]
                     [--stealing-configs py-steal,py-nosteal,go-steal,go-nosteal]

Cases (4 stock workers x 1 thread with nannies, 1 GiB each):

  late-joiner  3 workers run a 200-task non-root graph (each task of 0.2 s
               needs one of 5 small seeds, so it is placed on the seed's
               holder, not withheld); the 4th worker starts right after the
               graph was submitted and only stealing gives it work.
  skewed       120 root tasks with withholding off (worker-saturation inf):
               the first half sleep 0.2 s, the second 0.02 s. Co-location
               hands consecutive tasks to the same worker, so two workers
               get the long ones and two the short ones.
  slow-worker  120 root tasks of 0.1 s with withholding off; worker w0 runs
               every task 4x slower (a stand-in for a CPU hog or an older
               machine): the scheduler's per-prefix estimate cannot see it.

Configurations: py-steal / py-nosteal (dask scheduler) and go-steal /
go-nosteal (bin/dask-go-scheduler), work stealing set with
DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING; the case sets the saturation.
Schedule: for each repetition, each case, each configuration in turn
(interleaved), a fresh cluster. Recorded per run: wall time from submit to
result, tasks per worker (each task returns its worker's name), bytes
transferred between workers, and the confirmed steals (the "confirm"
events of the "stealing" topic, which both schedulers log). Results:
RESULTS/stealing/latest.{json,md}, medians over the repetitions.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

NAME = "stealing"
CASES = ("late-joiner", "skewed", "slow-worker")
DEFAULT_CASES = CASES
WORK_STEALING = "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING"
SATURATION = "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION"
CONFIGS = {
    "py-steal": ("py", True),
    "py-nosteal": ("py", False),
    "go-steal": ("go", True),
    "go-nosteal": ("go", False),
}
DEFAULT_CONFIGS = tuple(CONFIGS)
N_WORKERS = 4
MEMORY_LIMIT = 2**30
SLOW_WORKER, SLOWDOWN = "w0", 4.0


# --- task functions (pickled by reference: the workers import this module)

def seed(j):
    return j


def work(s, i, duration):
    """Sleep `duration` seconds (SLOWDOWN times longer on SLOW_WORKER when
    s is the string "slow"); return the worker's name."""
    from distributed import get_worker

    name = get_worker().name
    if s == "slow" and name == SLOW_WORKER:
        duration *= SLOWDOWN
    time.sleep(duration)
    return name


# --- cases

def sizes(case: str, smoke: bool) -> dict:
    """Tasks, durations and the scheduler settings of a case."""
    k = 0.25 if smoke else 1.0
    if case == "late-joiner":
        return {"tasks": int(200 * k), "duration": 0.2, "saturation": "1.1", "initial": N_WORKERS - 1}
    if case == "skewed":
        return {"tasks": int(120 * k), "duration": 0.2, "short": 0.02, "saturation": "inf", "initial": N_WORKERS}
    if case == "slow-worker":
        return {"tasks": int(120 * k), "duration": 0.1, "saturation": "inf", "initial": N_WORKERS}
    raise ValueError(case)


def build(case: str, p: dict):
    """The case's graph as (dsk, keys): plain tuples, so both schedulers
    materialize the same tasks."""
    n = p["tasks"]
    dsk, keys = {}, []
    if case == "late-joiner":
        for j in range(5):
            dsk[("seed", j)] = (seed, j)
        for i in range(n):
            dsk[("work", i)] = (work, ("seed", i % 5), i, p["duration"])
            keys.append(("work", i))
    elif case == "skewed":
        for i in range(n):
            d = p["duration"] if i < n // 2 else p["short"]
            dsk[("work", i)] = (work, None, i, d)
            keys.append(("work", i))
    else:
        for i in range(n):
            dsk[("work", i)] = (work, "slow", i, p["duration"])
            keys.append(("work", i))
    return dsk, keys


def count_confirms(events) -> int:
    n = 0
    for ev in events:
        msg = ev[1] if len(ev) > 1 else None
        if isinstance(msg, (list, tuple)) and msg and msg[0] == "confirm":
            n += 1
    return n


def one_run(case: str, config: str, tmp: Path, smoke: bool, timeout: float) -> dict:
    from distributed import Client, wait

    from procs import Scheduler, Workers
    from workloads import worker_counters

    kind, steal = CONFIGS[config]
    p = sizes(case, smoke)
    rec = {"case": case, "configuration": config, "scheduler": kind, "stealing": steal,
           "tasks": p["tasks"], "ok": False}
    env = {WORK_STEALING: "True" if steal else "False", SATURATION: p["saturation"]}
    sched = Scheduler(kind, env, tmp)
    first = Workers(tmp, sched.scheduler_file, p["initial"], MEMORY_LIMIT)
    late = Workers(tmp, sched.scheduler_file, N_WORKERS - p["initial"], MEMORY_LIMIT, first=p["initial"])
    try:
        sched.launch()
        first.start()
        sched.wait_ready()
        with Client(scheduler_file=str(sched.scheduler_file), timeout=60) as client:
            client.wait_for_workers(p["initial"], timeout=120)
            client.submit(seed, -1, pure=False).result(60)  # warm: imports, comms
            dsk, keys = build(case, p)
            t0 = time.monotonic()
            futures = client.get(dsk, keys, sync=False)
            if late.n:
                late.start()
            wait(futures, timeout=timeout)
            names = client.gather(futures)
            rec["wall_s"] = time.monotonic() - t0
            per = {}
            for name in names:
                per[name] = per.get(name, 0) + 1
            rec["tasks_per_worker"] = dict(sorted(per.items()))
            rec["workers_used"] = len(per)
            rec["max_worker_share"] = max(per.values()) / len(names)
            counters = client.run(worker_counters)
            rec["transferred_bytes"] = sum(c["transferred"] for c in counters.values())
            rec["steals_confirmed"] = count_confirms(client.get_events("stealing"))
            rec["ok"] = len(names) == p["tasks"]
            if not rec["ok"]:
                rec["error"] = f"{len(names)} results for {p['tasks']} tasks"
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
        with (tmp.parent / "failures.log").open("a") as f:
            f.write(f"=== {case} {config}\n{rec['traceback']}\n--- scheduler\n{sched.logs()}\n"
                    f"--- workers\n{first.logs()}\n")
    finally:
        late.stop()
        first.stop()
        sched.stop()
    return rec


def run_all(tmp: Path, cases: list[str], configs: list[str], repetitions: int, smoke: bool, timeout: float,
            on_record=lambda results: None) -> list[dict]:
    """Interleaved: for each repetition, each case, each configuration."""
    from procs import run_interleaved

    def describe(rec: dict) -> str:
        return (f"{rec['wall_s']:6.1f} s, tasks per worker {rec['tasks_per_worker']}, "
                f"{rec['steals_confirmed']} steals, {rec['transferred_bytes'] / 2**20:.1f} MiB moved")

    return run_interleaved(
        tmp, NAME, cases, repetitions, lambda case, rep: configs,
        lambda case, config, d, prof: one_run(case, config, d, smoke, timeout), describe, on_record)


# --- report

FIELDS = ("wall_s", "workers_used", "max_worker_share", "transferred_bytes", "steals_confirmed")


def markdown(results: list[dict], machine: dict) -> str:
    from report import group_medians, runs_table

    med = group_medians(results, ("case", "configuration"), FIELDS)

    def fmt(v, unit=1.0, d=1):
        return "–" if v is None else f"{v / unit:,.{d}f}"

    def per_worker(case: str, config: str) -> str:
        """Median tasks per worker name over the successful runs."""
        import statistics

        runs = [r for r in results if r["case"] == case and r["configuration"] == config and r["ok"]]
        names = sorted({n for r in runs for n in r["tasks_per_worker"]})
        return ", ".join(f"{n} {statistics.median(r['tasks_per_worker'].get(n, 0) for r in runs):g}"
                         for n in names) or "–"

    lines = [
        "# Work stealing: Go vs Python, stealing on and off",
        "",
        f"Command: `{machine.get('command', '')}`  ",
        f"Machine: {machine.get('machine', '')}, Python {machine.get('python', '')}  ",
        f"Started: {machine.get('started', '')}; {N_WORKERS} stock workers x 1 thread with nannies; fresh "
        "cluster per run; interleaved (each repetition runs every case under every configuration in turn); "
        "medians of the successful runs.",
        "",
        "Cases: late-joiner (3 workers run 200 non-root tasks of 0.2 s, a 4th joins after the submit), "
        "skewed (120 roots, withholding off, the first half 10x longer), slow-worker (120 roots of 0.1 s, "
        f"withholding off, {SLOW_WORKER} runs them {SLOWDOWN:g}x slower). Wall = submit to last result. "
        "Steals = confirmed steals (\"confirm\" events of the \"stealing\" topic).",
        "",
        "| case | configuration | runs ok | wall s | vs same scheduler without stealing | workers used "
        "| largest share | tasks per worker (median) | steals | transferred MiB |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for case in dict.fromkeys(r["case"] for r in results):
        for config in CONFIGS:
            m = med.get((case, config))
            if m is None:
                continue
            kind = CONFIGS[config][0]
            base = med.get((case, f"{kind}-nosteal"))
            ratio = "–"
            if base and base["wall_s"] and m["wall_s"] is not None and config.endswith("-steal"):
                ratio = f"{m['wall_s'] / base['wall_s']:.2f}x"
            lines.append(
                f"| {case} | {config} | {m['ok']}/{m['runs']} | {fmt(m['wall_s'])} | {ratio} "
                f"| {fmt(m['workers_used'], 1, 0)} | {fmt(m['max_worker_share'] and 100 * m['max_worker_share'], 1, 0)} % "
                f"| {per_worker(case, config)} | {fmt(m['steals_confirmed'], 1, 0)} "
                f"| {fmt(m['transferred_bytes'], 2**20, 2)} |")
    lines += runs_table(
        [dict(r, scheduler=r["configuration"]) for r in results],
        [("wall s", lambda r: fmt(r.get("wall_s"))),
         ("tasks per worker", lambda r: str(r.get("tasks_per_worker", "–"))),
         ("steals", lambda r: fmt(r.get("steals_confirmed"), 1, 0)),
         ("transferred MiB", lambda r: fmt(r.get("transferred_bytes"), 2**20, 2))])
    return "\n".join(lines) + "\n"


def write(out: Path, results: list[dict], machine: dict) -> None:
    from report import write_named

    write_named(out / NAME, "latest", results, machine, markdown(results, machine))
