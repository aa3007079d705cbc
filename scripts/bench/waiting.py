"""What the scheduler holds per task: a graph of N tasks that cannot run
(no workers), Go side by side with the Python scheduler.

    scripts/bench.sh --workloads waiting [--repetitions 3] [--waiting-cases waiting-100k,waiting-1m]

Each run starts a fresh scheduler with no workers, connects a Client, and
records the scheduler process's RSS (baseline). It then submits a binary
reduction tree of plain builtins (overhead.tree_graph: n/2 `int(i)` leaves,
n/2 - 1 `operator.add`), whose tasks stay waiting, queued or no-worker, and
waits until the scheduler side is idle: its CPU time grows by less than 2 %
of a core over 3 s and its RSS by less than 1 %. The settled RSS minus the
baseline, per task, is what the scheduler keeps for a waiting task.

For Go, the Go process and its materializer helper are both measured (the
helper's memory is the scheduler side's too, and shown apart), and the
run_spec bytes the engine holds are read from the scheduler's log (the
"graph materialized" line): per task beyond the run_spec = (Go settled RSS -
baseline - run_spec bytes) / tasks. Python holds each run_spec too (as a
pickled object inside its TaskState); its figure is the whole delta.
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

from overhead import tree_graph
from procs import Sampler, Scheduler, run_interleaved
from report import group_medians, runs_table, write_named

NAME = "waiting"
CASES = {"waiting-100k": (100_000, 2_000), "waiting-1m": (1_000_000, 4_000)}  # tasks: full, smoke
DEFAULT_CASES = tuple(CASES)
IDLE_WINDOW_S, IDLE_CPU_FRACTION, IDLE_RSS_FRACTION = 3.0, 0.02, 0.01


def run_spec_bytes(log: Path) -> int | None:
    """The run_spec bytes the Go scheduler reported for its graphs."""
    total, seen = 0, False
    for line in log.read_text(errors="replace").splitlines():
        if '"graph materialized"' not in line:
            continue
        try:
            total += int(json.loads(line)["run_spec_bytes"])
            seen = True
        except (ValueError, KeyError):
            continue
    return total if seen else None


def wait_idle(sampler: Sampler, timeout: float) -> float:
    """Wait until the scheduler side's CPU and RSS have been flat for
    IDLE_WINDOW_S; returns the seconds waited."""
    t0 = time.monotonic()
    last_cpu, last_rss, last_t = sum(sampler.scheduler_cpu()), sampler.total_rss[-1], t0
    while True:
        time.sleep(IDLE_WINDOW_S)
        now = time.monotonic()
        cpu, rss = sum(sampler.scheduler_cpu()), sampler.total_rss[-1]
        if cpu - last_cpu < IDLE_CPU_FRACTION * (now - last_t) and abs(rss - last_rss) <= IDLE_RSS_FRACTION * rss:
            return now - t0
        if now - t0 > timeout:
            raise TimeoutError(f"the scheduler did not settle within {timeout:.0f} s")
        last_cpu, last_rss, last_t = cpu, rss, now


def one_run(case: str, kind: str, n: int, tmp: Path, timeout: float, profile: Path | None = None) -> dict:
    from distributed import Client

    dsk, root = tree_graph(n, "wait")
    rec = {"case": case, "scheduler": kind, "tasks": len(dsk), "ok": False}
    sched = Scheduler(kind, {}, tmp, profile=profile).start()
    try:
        with Client(scheduler_file=str(sched.scheduler_file), timeout=60) as client:
            sampler = Sampler([], sched.proc.pid).start()
            time.sleep(1)
            base = sampler.scheduler_rss[-1], sampler.helper_rss[-1]
            cpu0 = sampler.scheduler_cpu()
            t0 = time.monotonic()
            future = client.get(dsk, root, sync=False)
            rec["settle_s"] = time.monotonic() - t0 + wait_idle(sampler, timeout)
            sampler.stop()
            sched.snapshot_heap()  # with --profile: the Go heap holding the waiting graph
            cpu1 = sampler.scheduler_cpu()
            rec.update(
                baseline_rss_bytes=base[0], helper_baseline_rss_bytes=base[1],
                settled_rss_bytes=sampler.scheduler_rss[-1], helper_settled_rss_bytes=sampler.helper_rss[-1],
                peak_rss_bytes=max(sampler.scheduler_rss), helper_peak_rss_bytes=max(sampler.helper_rss),
                side_peak_rss_bytes=max(sampler.total_rss),
                cpu_s=cpu1[0] - cpu0[0], helper_cpu_s=max(0.0, cpu1[1] - cpu0[1]),
            )
            delta = rec["settled_rss_bytes"] - rec["baseline_rss_bytes"]
            rec["rss_per_task"] = delta / rec["tasks"]
            if kind == "go":
                spec = run_spec_bytes(sched.log_path)
                if spec is None:
                    raise RuntimeError("the Go scheduler logged no 'graph materialized' line")
                rec["run_spec_bytes"] = spec
                rec["run_spec_per_task"] = spec / rec["tasks"]
                rec["rss_per_task_beyond_run_spec"] = (delta - spec) / rec["tasks"]
            client.cancel(future)
            rec["ok"] = True
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
        with (tmp.parent / "failures.log").open("a") as f:
            f.write(f"=== {case} {kind}\n{rec['traceback']}\n--- scheduler\n{sched.logs()}\n")
    finally:
        sched.stop()
    return rec


def run_all(tmp: Path, cases: list[str], repetitions: int, smoke: bool, timeout: float,
            on_record=lambda results: None, profile: Path | None = None) -> list[dict]:
    """Interleaved: for each repetition, each case, py then go."""
    def describe(rec: dict) -> str:
        line = f"settled in {rec['settle_s']:6.1f} s, {rec['rss_per_task']:7.0f} B/task"
        if rec["scheduler"] == "go":
            line += (f" ({rec['rss_per_task_beyond_run_spec']:.0f} beyond {rec['run_spec_per_task']:.0f} of "
                     f"run_spec), helper {rec['helper_settled_rss_bytes'] / 2**20:.0f} MiB")
        return line

    return run_interleaved(
        tmp, NAME, cases, repetitions, lambda case, rep: ("py", "go"),
        lambda case, kind, d, prof: one_run(case, kind, CASES[case][1 if smoke else 0], d, timeout, prof),
        describe, on_record, profile)


# ---- report ------------------------------------------------------------------

FIELDS = ("tasks", "settle_s", "baseline_rss_bytes", "settled_rss_bytes", "peak_rss_bytes", "rss_per_task",
          "run_spec_per_task", "rss_per_task_beyond_run_spec", "helper_settled_rss_bytes", "helper_peak_rss_bytes",
          "side_peak_rss_bytes", "cpu_s", "helper_cpu_s")


def markdown(results: list[dict], machine: dict) -> str:
    med = group_medians(results, ("case", "scheduler"), FIELDS)
    mib = 2**20

    def fmt(v, unit=1.0, d=0):
        return "–" if v is None else f"{v / unit:,.{d}f}"

    lines = [
        "# Waiting tasks: what the scheduler holds per task, Go vs Python",
        "",
        f"Command: `{machine.get('command', '')}`  ",
        f"Machine: {machine.get('machine', '')}, Python {machine.get('python', '')}  ",
        f"Started: {machine.get('started', '')}; no workers: every task stays waiting, queued or no-worker; "
        "medians of the runs shown (interleaved py, go, py, go, ...).",
        "",
        "Per task = (the scheduler process's RSS once it is idle - its RSS before the graph) / tasks. For Go, "
        "run_spec bytes are what the engine holds of the graph's specs (its log's `graph materialized` line), "
        "and the materializer helper's RSS, which is the scheduler side's too, is shown apart. Python's "
        "figure includes its run_specs.",
        "",
        "| case | tasks | scheduler | runs ok | settled s | RSS before → settled MiB | peak MiB "
        "| B/task | run_spec B/task | B/task beyond run_spec | helper settled / peak MiB | Go+helper peak MiB "
        "| CPU s (+ helper) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in dict.fromkeys(r["case"] for r in results):
        for kind in ("py", "go"):
            m = med.get((case, kind))
            if m is None:
                continue
            go = kind == "go"
            lines.append(
                f"| {case} | {fmt(m['tasks'])} | {kind} | {m['ok']}/{m['runs']} | {fmt(m['settle_s'], 1, 1)} "
                f"| {fmt(m['baseline_rss_bytes'], mib)} → {fmt(m['settled_rss_bytes'], mib)} "
                f"| {fmt(m['peak_rss_bytes'], mib)} | {fmt(m['rss_per_task'])} "
                f"| {fmt(m['run_spec_per_task']) if go else 'incl.'} "
                f"| {fmt(m['rss_per_task_beyond_run_spec']) if go else '–'} "
                f"| {fmt(m['helper_settled_rss_bytes'], mib) + ' / ' + fmt(m['helper_peak_rss_bytes'], mib) if go else '–'} "
                f"| {fmt(m['side_peak_rss_bytes'], mib) if go else '–'} "
                f"| {fmt(m['cpu_s'], 1, 1)}{' + ' + fmt(m['helper_cpu_s'], 1, 1) if go else ''} |")
    lines += runs_table(results, [
        ("settled s", lambda r: fmt(r.get("settle_s"), 1, 1)),
        ("before MiB", lambda r: fmt(r.get("baseline_rss_bytes"), mib)),
        ("settled MiB", lambda r: fmt(r.get("settled_rss_bytes"), mib)),
        ("peak MiB", lambda r: fmt(r.get("peak_rss_bytes"), mib)),
        ("B/task", lambda r: fmt(r.get("rss_per_task"))),
        ("beyond run_spec B/task", lambda r: fmt(r.get("rss_per_task_beyond_run_spec"))),
        ("helper settled MiB", lambda r: fmt(r.get("helper_settled_rss_bytes"), mib)),
    ])
    return "\n".join(lines) + "\n"


def write(out: Path, results: list[dict], machine: dict) -> None:
    write_named(out, NAME, results, machine, markdown(results, machine))
