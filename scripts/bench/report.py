"""Writes a benchmark run's results: latest.json (one record per run),
timeseries.json (memory samples), overhead.json, latest.md (medians and
ratios to the py-queuing baseline) and PNG plots (memory over time per
workload, one line per configuration; bar charts of peak-memory and runtime
ratios)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

BASELINE = "py-queuing"
RECORD_FIELDS = ("workload", "configuration", "repetition", "wall_s", "peak_memory_bytes",
                 "peak_worker_memory_bytes", "transferred_bytes", "spilled_bytes", "scheduler_cpu_s", "scheduler_peak_rss_bytes")
GiB, MiB = 2**30, 2**20


def write_named(out: Path, name: str, results: list[dict], machine: dict, md: str) -> None:
    """NAME.json (every run, with the machine) and NAME.md in out."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps({"machine": machine, "results": results}, indent=1))
    (out / f"{name}.md").write_text(md)


def runs_table(results: list[dict], columns: list[tuple[str, object]]) -> list[str]:
    """The "Every run:" table of a case benchmark (graph-path, waiting): case,
    scheduler, repetition and outcome, then each (header, value-of-record)
    column."""
    lines = ["", "Every run:", "", "| case | scheduler | rep | ok | " + " | ".join(h for h, _ in columns) + " |",
             "|---|---|---:|---|" + "---:|" * len(columns)]
    for r in results:
        outcome = "ok" if r["ok"] else r.get("error")
        lines.append(f"| {r['case']} | {r['scheduler']} | {r.get('repetition', 0)} | {outcome} | "
                     + " | ".join(value(r) for _, value in columns) + " |")
    return lines


def group_medians(records: list[dict], by: tuple[str, ...], fields: tuple[str, ...]) -> dict[tuple, dict]:
    """(values of `by`) -> median of each of `fields` over the successful
    runs, plus the run counts and the first failure's error."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault(tuple(r[f] for f in by), []).append(r)
    out = {}
    for key, runs in groups.items():
        ok = [r for r in runs if r["ok"]]
        m = {"runs": len(runs), "ok": len(ok), "error": next((r.get("error") for r in runs if not r["ok"]), None)}
        for f in fields:
            values = [r[f] for r in ok if r.get(f) is not None]
            m[f] = statistics.median(values) if values else None
        out[key] = m
    return out


def with_side_totals(records: list[dict]) -> list[dict]:
    """The scheduler side is the scheduler process plus its children (the Go
    scheduler's materializer helper): every CPU and memory figure counts
    both. side_cpu_s sums the CPU; side_peak_rss_bytes is the peak of the
    RSS summed at each sample, or, for runs recorded before that was
    sampled, the sum of the two peaks (an upper bound)."""
    out = []
    for r in records:
        r = dict(r)
        if r.get("scheduler_cpu_s") is not None:
            r["side_cpu_s"] = r["scheduler_cpu_s"] + (r.get("helper_cpu_s") or 0.0)
        if r.get("cpu_us_per_task") is not None:
            r["side_cpu_us_per_task"] = r["cpu_us_per_task"] + (r.get("helper_cpu_us_per_task") or 0.0)
        peak = r.get("scheduler_side_peak_rss_bytes")
        if peak is None and r.get("scheduler_peak_rss_bytes") is not None:
            peak = r["scheduler_peak_rss_bytes"] + (r.get("helper_peak_rss_bytes") or 0)
        r["side_peak_rss_bytes"] = peak
        out.append(r)
    return out


def medians(records: list[dict]) -> dict[tuple[str, str], dict]:
    """(workload, configuration) -> medians over the successful runs."""
    return group_medians(with_side_totals(records), ("workload", "configuration"),
                         RECORD_FIELDS[3:] + ("helper_cpu_s", "helper_peak_rss_bytes", "side_cpu_s",
                                              "side_peak_rss_bytes"))


def ratio(value, base) -> str:
    if value is None or not base:
        return "–"
    return f"{value / base:.2f}"


def fmt(value, unit: float, digits: int = 2) -> str:
    return "–" if value is None else f"{value / unit:.{digits}f}"


def workload_table(records: list[dict]) -> list[str]:
    med = medians(records)
    workloads = list(dict.fromkeys(r["workload"] for r in records))
    configs = list(dict.fromkeys(r["configuration"] for r in records))
    lines = [
        "| workload | configuration | wall s | × py-q | peak mem GiB | × py-q | largest worker peak MiB | × py-q "
        "| transferred MiB | × py-q | spilled MiB | scheduler side CPU s (helper) "
        "| scheduler side peak RSS MiB (helper) | ok/runs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in workloads:
        base = med.get((w, BASELINE), {})
        for c in configs:
            m = med.get((w, c))
            if m is None:
                continue
            lines.append(
                f"| {w} | {c} | {fmt(m['wall_s'], 1, 1)} | {ratio(m['wall_s'], base.get('wall_s'))} "
                f"| {fmt(m['peak_memory_bytes'], GiB)} | {ratio(m['peak_memory_bytes'], base.get('peak_memory_bytes'))} "
                f"| {fmt(m['peak_worker_memory_bytes'], MiB, 0)} "
                f"| {ratio(m['peak_worker_memory_bytes'], base.get('peak_worker_memory_bytes'))} "
                f"| {fmt(m['transferred_bytes'], MiB, 0)} | {ratio(m['transferred_bytes'], base.get('transferred_bytes'))} "
                f"| {fmt(m['spilled_bytes'], MiB, 0)} "
                f"| {fmt(m['side_cpu_s'], 1, 1)} ({fmt(m['helper_cpu_s'], 1, 1)}) "
                f"| {fmt(m['side_peak_rss_bytes'], MiB, 0)} ({fmt(m['helper_peak_rss_bytes'], MiB, 0)}) "
                f"| {m['ok']}/{m['runs']} |")
    return lines


OVERHEAD_FIELDS = ("tasks", "wall_s", "tasks_per_s", "cpu_us_per_task", "helper_cpu_us_per_task",
                   "side_cpu_us_per_task", "first_task_s", "scheduler_peak_rss_bytes", "helper_peak_rss_bytes",
                   "side_peak_rss_bytes")


def overhead_table(over: list[dict]) -> list[str]:
    lines = [
        "| benchmark | scheduler | tasks | wall s | tasks/s | CPU µs/task: scheduler + helper | × py "
        "| first task s | peak RSS MiB of scheduler + helper (each one's own peak) | × py | ok/runs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    med = group_medians(with_side_totals(over), ("benchmark", "scheduler"), OVERHEAD_FIELDS)
    for (bench, sched), m in med.items():
        if not m["ok"]:
            lines.append(f"| {bench} | {sched} | FAILED: {(m['error'] or '')[:80]} |||||||| 0/{m['runs']} |")
            continue
        py = med.get((bench, "py"), {})
        lines.append(
            f"| {bench} | {sched} | {m['tasks']:.0f} | {fmt(m['wall_s'], 1)} | {fmt(m['tasks_per_s'], 1, 0)} "
            f"| {fmt(m['side_cpu_us_per_task'], 1, 1)} = {fmt(m['cpu_us_per_task'], 1, 1)} + "
            f"{fmt(m['helper_cpu_us_per_task'], 1, 1)} "
            f"| {ratio(m['side_cpu_us_per_task'], py.get('side_cpu_us_per_task'))} | {fmt(m['first_task_s'], 1)} "
            f"| {fmt(m['side_peak_rss_bytes'], MiB, 0)} ({fmt(m['scheduler_peak_rss_bytes'], MiB, 0)}, "
            f"{fmt(m['helper_peak_rss_bytes'], MiB, 0)}) "
            f"| {ratio(m['side_peak_rss_bytes'], py.get('side_peak_rss_bytes'))} | {m['ok']}/{m['runs']} |")
    return lines


def markdown(records: list[dict], over: list[dict], machine: dict, plots: list[str]) -> str:
    descriptions = {}
    for r in records:
        if "description" in r:
            descriptions.setdefault(r["workload"], r["description"])
    out = [
        "# Benchmarks: Go scheduler vs Python scheduler",
        "",
        f"Command: `{machine['command']}`  ",
        f"Machine: {machine['machine']}  ",
        f"Cluster: {machine['workers']} stock workers × 1 thread, memory limit "
        f"{machine['memory_limit_bytes'] / GiB:.2f} GiB each; scale {machine['scale']}; "
        f"{machine['repetitions']} interleaved repetition(s); started {machine['started']}.",
        "",
        "Figures are medians over the successful repetitions; × py-q is the ratio to the "
        f"`{BASELINE}` median (lower is better). Peak mem = peak of the worker processes' summed RSS "
        "(sampled every 100 ms); largest worker peak = the highest of each worker's own peak RSS (runs recorded before it was sampled: –); transferred = Σ workers' `transfer_outgoing_bytes_total`; spilled = "
        "Σ workers' spill-buffer `(\"disk-write\", \"bytes\")`. Scheduler side = the scheduler process "
        "**plus** its children (the Go scheduler's materializer helper, shown in parentheses): CPU summed; "
        "peak RSS of the sum at each sample (runs recorded before that was sampled: the sum of the two "
        "peaks, an upper bound).",
        "",
    ]
    if records:
        out += ["## Workloads", ""]
        out += [f"- **{w}**: {d}" for w, d in descriptions.items()]
        out += [""] + workload_table(records) + [""]
    if over:
        out += ["## Scheduler overhead", "",
                "Zero workers: 4 fake Go workers × 32 threads that finish each task on arrival; "
                "stock-array: 4 stock workers × 1 thread. CPU µs/task = scheduler CPU time delta / tasks; "
                "figures are medians over the repetitions (ok/runs), × py = Go / Python.",
                ""] + overhead_table(over) + [""]
    failed = [r for r in records + over if not r["ok"]]
    if failed:
        out += ["## Failed runs", ""]
        out += [f"- {r.get('workload') or r.get('benchmark')} / {r.get('configuration') or r.get('scheduler')}"
                f" rep {r.get('repetition', 0)}: {r.get('error')}" for r in failed]
        out.append("")
    if plots:
        out += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return "\n".join(out)


def plot(out: Path, records: list[dict], series: dict) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    workloads = list(dict.fromkeys(r["workload"] for r in records))
    configs = list(dict.fromkeys(r["configuration"] for r in records))
    for w in workloads:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for c in configs:
            runs = sorted((r for r in records if r["workload"] == w and r["configuration"] == c and r["ok"]),
                          key=lambda r: r["repetition"])
            if not runs:
                continue
            ts = series.get(f"{w}|{c}|{runs[0]['repetition']}")
            if ts:
                ax.plot(ts["t"], [v / GiB for v in ts["worker_rss"]], label=c)
        ax.set_xlabel("time since compute (s)")
        ax.set_ylabel("worker RSS, summed (GiB)")
        ax.set_title(f"{w}: cluster memory over time (first repetition)")
        ax.legend()
        name = f"memory-{w}.png"
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        names.append(name)
    med = medians(records)
    others = [c for c in configs if c != BASELINE]
    for field, label in (("peak_memory_bytes", "peak memory"), ("wall_s", "runtime")):
        fig, ax = plt.subplots(figsize=(10, 4.5))
        width = 0.8 / max(1, len(others))
        for i, c in enumerate(others):
            values = []
            for w in workloads:
                base, m = med.get((w, BASELINE), {}).get(field), med.get((w, c), {}).get(field)
                values.append(m / base if base and m is not None else 0)
            ax.bar([j + i * width for j in range(len(workloads))], values, width, label=c)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([j + width * (len(others) - 1) / 2 for j in range(len(workloads))], workloads,
                      rotation=30, ha="right")
        ax.set_ylabel(f"{label} / {BASELINE}")
        ax.set_title(f"{label}: ratio to {BASELINE} (median, lower is better)")
        ax.legend()
        name = f"ratios-{label.replace(' ', '-')}.png"
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        names.append(name)
    return names


def write(out: Path, records: list[dict], series: dict, over: list[dict], machine: dict,
          with_plots: bool = True) -> None:
    """Write every output; with_plots=False is the cheap checkpoint after each
    run, so an interrupted full run keeps what it measured."""
    clean = [{k: v for k, v in r.items() if k != "traceback"} for r in records]
    (out / "latest.json").write_text(json.dumps(clean, indent=1))
    (out / "timeseries.json").write_text(json.dumps(series))
    (out / "overhead.json").write_text(json.dumps(
        {"machine": machine, "results": [{k: v for k, v in r.items() if k != "traceback"} for r in over]},
        indent=1))
    plots = plot(out, records, series) if records and with_plots else []
    (out / "latest.md").write_text(markdown(records, over, machine, plots))
