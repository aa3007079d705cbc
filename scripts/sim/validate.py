#!/usr/bin/env python
"""Validation: simulated vs measured, at the benchmark suite's small scale.

Reads the benchmark results (scripts/bench/results/latest.json: one record
per run with workload, configuration, wall_s, peak_memory_bytes) and the
simulator's records at scale "small" (scripts/sim/results/latest.json),
matches go-noqueue/main, go-queuing/withholding and
go-queuing-coassign/coassign on the same cluster size, and writes
scripts/sim/results/validation.md: medians of the measured runs, the
simulated values, and the relative error.

Measured peak memory is the workers' RSS (Python, libraries, buffers
included); the simulator counts task data only, so the table also gives the
error after subtracting the measured baseline: the workers' summed RSS at
the start of the run (the first sample of timeseries.json, next to
latest.json). Until the benchmark results exist the table says "pending".

    .venv/bin/python scripts/sim/validate.py
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PAIRS = {"go-noqueue": "main", "go-queuing": "withholding", "go-queuing-coassign": "coassign"}


def load(path):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None


def baseline(series, r):
    """The workers' summed RSS when the run started (idle processes)."""
    s = (series or {}).get(f"{r['workload']}|{r['configuration']}|{r['repetition']}")
    return s["worker_rss"][0] if s and s.get("worker_rss") else None


def table(bench, sim, n_workers, series=None):
    measured = defaultdict(list)
    for r in bench:
        if r.get("configuration") in PAIRS and "wall_s" in r and r.get("ok", True):
            measured[(r["workload"], PAIRS[r["configuration"]])].append(r)
    simulated = {(r["workload"], r["mode"]): r for r in sim
                 if r.get("scale") == "small" and r.get("n_workers") == n_workers and "error" not in r}
    rows = []
    for (wl, mode), runs in sorted(measured.items()):
        s = simulated.get((wl, mode))
        if s is None:
            continue
        wall = statistics.median(r["wall_s"] for r in runs)
        peak = statistics.median(r["peak_memory_bytes"] for r in runs)
        above = [r["peak_memory_bytes"] - b for r in runs if (b := baseline(series, r)) is not None]
        above = statistics.median(above) if above else None
        rows.append((wl, mode, len(runs), wall, s["makespan_s"], peak, above, s["peak_cluster_memory_bytes"]))
    return rows


def err(sim, real):
    return f"{100 * (sim - real) / real:+.0f}%" if real else "n/a"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", type=Path, default=ROOT / "scripts" / "bench" / "results" / "latest.json")
    ap.add_argument("--sim", type=Path, default=HERE / "results" / "latest.json")
    ap.add_argument("--workers", type=int, default=4, help="cluster size of the benchmark runs")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "validation.md")
    args = ap.parse_args(argv)
    bench, sim = load(args.bench), load(args.sim) or []
    series = load(args.bench.parent / "timeseries.json")
    lines = ["# Validation: simulated vs measured (benchmark suite, small scale)", ""]
    rows = table(bench, sim, args.workers, series) if bench else []
    if not rows:
        why = f"{args.bench} does not exist yet" if bench is None else \
            "no benchmark record matches a simulated small-scale run"
        lines += [f"Pending: {why}. Run scripts/bench.sh, then", "",
                  "    scripts/export-graph.py anom-mean basic-sum climactic-mean --scale small",
                  f"    bin/dask-go-sim sweep -scale small -workers {args.workers} -threads 1 -memory-limit 1GiB "
                  "-workloads anom-mean,basic-sum,climactic-mean",
                  "    bin/dask-go-sim report && .venv/bin/python scripts/sim/validate.py", ""]
    else:
        lines += ["Real: medians of the benchmark runs (scripts/bench/results/latest.json). Peak RSS is the "
                  "workers' summed RSS; above start = peak RSS minus the idle workers' RSS at the start of the run "
                  "(interpreter, libraries), the part the simulator models.", "",
                  "| workload | mode | real runs | real wall s | sim makespan s | error | real peak RSS GiB "
                  "| real above start GiB | sim peak GiB | error vs above start |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for wl, mode, n, wall, mk, peak, above, speak in rows:
            above_s = "–" if above is None else f"{above / 2**30:.2f}"
            lines.append(f"| {wl} | {mode} | {n} | {wall:.1f} | {mk:.1f} | {err(mk, wall)} | "
                         f"{peak / 2**30:.2f} | {above_s} | {speak / 2**30:.2f} | "
                         f"{err(speak, above) if above else 'n/a'} |")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
