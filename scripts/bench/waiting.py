"""What the scheduler holds per task: a graph of N tasks that cannot run
(no workers), Go side by side with the Python scheduler.

    scripts/bench.sh --workloads waiting [--repetitions 3] [--waiting-cases waiting-100k,waiting-200k,waiting-1m]
        [--waiting-schedulers py,go]   # go:PATH: the Go binary at PATH, to compare two builds

Each run starts a fresh scheduler with no workers, connects a Client, and
records the scheduler process's RSS (baseline). It then submits a binary
reduction tree of plain builtins (overhead.tree_graph: n/2 `int(i)` leaves,
n/2 - 1 `operator.add`), whose tasks stay waiting, queued or no-worker, and
waits until the scheduler side is idle: over 3 s its CPU time grows by at
most 2 % of a core more than it did over 3 s before the graph, and its RSS by
less than 1 %. (Python's scheduler alone, with no graph, spends 1.3-2.0 % of a
core on its periodic callbacks here, more on a slower machine: a fixed 2 %
bound left it unsettled for minutes on one CI run.) The settled RSS minus the
baseline, per task, is what the scheduler keeps for a waiting task.

For Go, the Go process and its materializer helper are both measured (the
helper's memory is the scheduler side's too, and shown apart), and the
run_spec bytes the engine holds are read from the scheduler's log (the
"graph materialized" line): per task beyond the run_spec = (Go settled RSS -
baseline - run_spec bytes) / tasks. Python holds each run_spec too (as a
pickled object inside its TaskState); its figure is the whole delta. The
helper's growth per task (settled - baseline) is shown apart and summed with
the Go process's: both are what the scheduler side keeps.
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

from overhead import tree_graph
from procs import Sampler, Scheduler, run_interleaved, scrape_metrics
from report import group_medians, runs_table, write_named

NAME = "waiting"
CASES = {"waiting-100k": (100_000, 2_000), "waiting-200k": (200_000, 3_000),
         "waiting-1m": (1_000_000, 4_000)}  # tasks: full, smoke
DEFAULT_CASES = ("waiting-100k", "waiting-1m")
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


# the Go runtime's memory at the settled point, from /metrics (the Go
# collector's go_memstats_*): what of the RSS is heap in use, heap kept but
# free, stacks and the runtime's own
GO_MEMSTATS = ("heap_inuse_bytes", "heap_idle_bytes", "heap_released_bytes", "heap_alloc_bytes", "stack_inuse_bytes",
               "mspan_inuse_bytes", "gc_sys_bytes", "other_sys_bytes", "sys_bytes", "next_gc_bytes")


def go_memstats(scheduler_file: Path) -> dict:
    """go_memstats_* of a Go scheduler ({} when /metrics does not answer)."""
    try:
        port = json.loads(scheduler_file.read_text())["services"]["dashboard"]
        samples = scrape_metrics(f"http://127.0.0.1:{port}/metrics")
    except (OSError, ValueError, KeyError):
        return {}
    return {f"go_{f}": samples[f"go_memstats_{f}"] for f in GO_MEMSTATS if f"go_memstats_{f}" in samples}


def idle_cpu_rate(sampler: Sampler) -> float:
    """The scheduler side's CPU, in cores, over IDLE_WINDOW_S with nothing
    to do: the floor its periodic callbacks set."""
    cpu0, t0 = sum(sampler.scheduler_cpu()), time.monotonic()
    time.sleep(IDLE_WINDOW_S)
    return (sum(sampler.scheduler_cpu()) - cpu0) / (time.monotonic() - t0)


def wait_idle(sampler: Sampler, timeout: float, idle_rate: float) -> float:
    """Wait until the scheduler side's CPU has been within IDLE_CPU_FRACTION
    of a core of idle_rate, and its RSS flat, for IDLE_WINDOW_S; returns the
    seconds waited."""
    t0 = time.monotonic()
    last_cpu, last_rss, last_t = sum(sampler.scheduler_cpu()), sampler.total_rss[-1], t0
    while True:
        time.sleep(IDLE_WINDOW_S)
        now = time.monotonic()
        cpu, rss = sum(sampler.scheduler_cpu()), sampler.total_rss[-1]
        if (cpu - last_cpu <= (idle_rate + IDLE_CPU_FRACTION) * (now - last_t)
                and abs(rss - last_rss) <= IDLE_RSS_FRACTION * rss):
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
            rec["idle_cpu_rate"] = idle_rate = idle_cpu_rate(sampler)
            base = sampler.scheduler_rss[-1], sampler.helper_rss[-1]
            if kind.startswith("go"):  # the same figures before the graph: the graph's share is the difference
                rec.update({f"base_{k}": v for k, v in go_memstats(sched.scheduler_file).items()})
            cpu0 = sampler.scheduler_cpu()
            t0 = time.monotonic()
            future = client.get(dsk, root, sync=False)
            rec["settle_s"] = time.monotonic() - t0 + wait_idle(sampler, timeout, idle_rate)
            sampler.stop()
            if kind.startswith("go"):
                rec.update(go_memstats(sched.scheduler_file))
            sched.snapshot_heap(wait=True)  # with --profile: the Go heap holding the waiting graph
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
            helper_delta = rec["helper_settled_rss_bytes"] - rec["helper_baseline_rss_bytes"]
            rec["helper_rss_per_task"] = helper_delta / rec["tasks"]
            rec["side_rss_per_task"] = (delta + helper_delta) / rec["tasks"]
            if kind.startswith("go"):
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
            on_record=lambda results: None, profile: Path | None = None,
            schedulers: tuple[str, ...] = ("py", "go")) -> list[dict]:
    """Interleaved: for each repetition, each case, each scheduler in order."""
    def describe(rec: dict) -> str:
        line = f"settled in {rec['settle_s']:6.1f} s, {rec['rss_per_task']:7.0f} B/task"
        if rec["scheduler"].startswith("go"):
            line += (f" ({rec['rss_per_task_beyond_run_spec']:.0f} beyond {rec['run_spec_per_task']:.0f} of "
                     f"run_spec), helper {rec['helper_settled_rss_bytes'] / 2**20:.0f} MiB "
                     f"(+{rec['helper_rss_per_task']:.0f} B/task)")
        return line

    return run_interleaved(
        tmp, NAME, cases, repetitions, lambda case, rep: schedulers,
        lambda case, kind, d, prof: one_run(case, kind, CASES[case][1 if smoke else 0], d, timeout, prof),
        describe, on_record, profile)


# ---- report ------------------------------------------------------------------

FIELDS = ("tasks", "settle_s", "baseline_rss_bytes", "settled_rss_bytes", "peak_rss_bytes", "rss_per_task",
          "run_spec_per_task", "rss_per_task_beyond_run_spec", "helper_settled_rss_bytes", "helper_peak_rss_bytes",
          "side_peak_rss_bytes", "cpu_s", "helper_cpu_s", "idle_cpu_rate", "helper_rss_per_task", "side_rss_per_task",
          *(f"go_{f}" for f in GO_MEMSTATS), *(f"base_go_{f}" for f in GO_MEMSTATS))


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
        "medians of the runs shown (interleaved py, go, go, py, ...: the order turns each repetition).",
        "",
        "Per task = (the scheduler process's RSS once it is idle - its RSS before the graph) / tasks. For Go, "
        "run_spec bytes are what the engine holds of the graph's specs (its log's `graph materialized` line), "
        "and the materializer helper's RSS, which is the scheduler side's too, is shown apart. Python's "
        "figure includes its run_specs. Idle = CPU within 2 % of a core of what the scheduler side spent "
        "over 3 s before the graph, and RSS flat within 1 %, over 3 s.",
        "",
        "| case | tasks | scheduler | runs ok | settled s | RSS before → settled MiB | peak MiB "
        "| B/task | run_spec B/task | B/task beyond run_spec | helper settled / peak MiB | helper B/task "
        "| Go+helper B/task | Go+helper peak MiB | CPU s (+ helper) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    kinds = list(dict.fromkeys(r["scheduler"] for r in results))
    for case in dict.fromkeys(r["case"] for r in results):
        for kind in kinds:
            m = med.get((case, kind))
            if m is None:
                continue
            go = kind.startswith("go")
            lines.append(
                f"| {case} | {fmt(m['tasks'])} | {kind} | {m['ok']}/{m['runs']} | {fmt(m['settle_s'], 1, 1)} "
                f"| {fmt(m['baseline_rss_bytes'], mib)} → {fmt(m['settled_rss_bytes'], mib)} "
                f"| {fmt(m['peak_rss_bytes'], mib)} | {fmt(m['rss_per_task'])} "
                f"| {fmt(m['run_spec_per_task']) if go else 'incl.'} "
                f"| {fmt(m['rss_per_task_beyond_run_spec']) if go else '–'} "
                f"| {fmt(m['helper_settled_rss_bytes'], mib) + ' / ' + fmt(m['helper_peak_rss_bytes'], mib) if go else '–'} "
                f"| {fmt(m['helper_rss_per_task']) if go else '–'} | {fmt(m['side_rss_per_task']) if go else '–'} "
                f"| {fmt(m['side_peak_rss_bytes'], mib) if go else '–'} "
                f"| {fmt(m['cpu_s'], 1, 1)}{' + ' + fmt(m['helper_cpu_s'], 1, 1) if go else ''} |")
    go_rows = [(case, kind, med[(case, kind)]) for case, kind in med
               if kind.startswith("go") and med[(case, kind)].get("go_heap_inuse_bytes") is not None]
    if go_rows:
        lines += ["", "The Go runtime at the settled point (its /metrics, go_memstats_*): heap in use (live objects "
                  "and the free room of their spans), of which live objects (heap_alloc), heap idle and not yet "
                  "returned to the OS, stacks, and the runtime's own (span structures, GC metadata, other); MiB.", "",
                  "| case | scheduler | RSS | heap in use | live objects | heap idle, kept | stacks | spans + GC + other "
                  "| next GC |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for case, kind, m in go_rows:
            kept = (m["go_heap_idle_bytes"] or 0) - (m["go_heap_released_bytes"] or 0)
            rt = sum(m.get(f"go_{f}") or 0 for f in ("mspan_inuse_bytes", "gc_sys_bytes", "other_sys_bytes"))
            lines.append(f"| {case} | {kind} | {fmt(m['settled_rss_bytes'], mib)} | {fmt(m['go_heap_inuse_bytes'], mib)} "
                         f"| {fmt(m['go_heap_alloc_bytes'], mib)} | {fmt(kept, mib)} "
                         f"| {fmt(m['go_stack_inuse_bytes'], mib)} | {fmt(rt, mib)} | {fmt(m['go_next_gc_bytes'], mib)} |")
    lines += runs_table(results, [
        ("settled s", lambda r: fmt(r.get("settle_s"), 1, 1)),
        ("before MiB", lambda r: fmt(r.get("baseline_rss_bytes"), mib)),
        ("settled MiB", lambda r: fmt(r.get("settled_rss_bytes"), mib)),
        ("peak MiB", lambda r: fmt(r.get("peak_rss_bytes"), mib)),
        ("B/task", lambda r: fmt(r.get("rss_per_task"))),
        ("beyond run_spec B/task", lambda r: fmt(r.get("rss_per_task_beyond_run_spec"))),
        ("helper settled MiB", lambda r: fmt(r.get("helper_settled_rss_bytes"), mib)),
        ("helper B/task", lambda r: fmt(r.get("helper_rss_per_task"))),
        ("Go+helper B/task", lambda r: fmt(r.get("side_rss_per_task"))),
    ])
    return "\n".join(lines) + "\n"


def write(out: Path, results: list[dict], machine: dict) -> None:
    write_named(out, NAME, results, machine, markdown(results, machine))
