#!/usr/bin/env python
"""One workload's simulated memory against its real runs, per mode: the
cluster's peak and the largest worker's peak, both above the workers'
idle start (what the simulator models; scripts/sim/validate.py compares
the cluster peak the same way), and the bytes moved.

    .venv/bin/python scripts/sim/real_vs_sim.py --workload anom-persist \\
        --real before=scripts/bench/results/coassign-anomaly/phase1 \\
        --real after=scripts/bench/results/coassign-anomaly/after \\
        --sim before=scripts/bench/results/coassign-anomaly/sim/before \\
        --sim after=scripts/bench/results/coassign-anomaly/sim/after

--real LABEL=DIR: a scripts/bench.sh result directory (latest.json and
timeseries.json, whose per_worker_rss gives each worker's own start and
peak); --sim LABEL=DIR: JSON records of `dask-go-sim run`, one per run,
named WORKLOAD-MODE-SEED.json. Real configurations map to modes as in
validate.py (go-queuing: withholding, go-queuing-coassign: coassign).
Each cell is the median over the runs, its range in brackets; the error
is the simulated median against the real one. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

MODES = {"go-queuing": "withholding", "go-queuing-coassign": "coassign"}
MiB = 2**20


def labelled(values: list[str]) -> list[tuple[str, Path]]:
    out = []
    for v in values:
        label, _, path = v.partition("=")
        out.append((label, Path(path)))
    return out


def real_runs(d: Path, workload: str) -> dict[str, list[dict]]:
    """mode -> per run: cluster and largest worker peaks above start (MiB),
    bytes moved (MiB)."""
    records = json.loads((d / "latest.json").read_text())
    series = json.loads((d / "timeseries.json").read_text())
    out: dict[str, list[dict]] = {}
    for r in records:
        mode = MODES.get(r["configuration"])
        if mode is None or r["workload"] != workload or not r["ok"]:
            continue
        ts = series[f"{r['workload']}|{r['configuration']}|{r['repetition']}"]
        total, each = ts["worker_rss"], ts["per_worker_rss"]
        start = each[0]
        largest = max(max(col) - s for col, s in zip(zip(*each), start))
        out.setdefault(mode, []).append({"cluster": (max(total) - total[0]) / MiB, "largest": largest / MiB,
                                         "moved": r["transferred_bytes"] / MiB})
    return out


def sim_runs(d: Path, workload: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in sorted(d.glob(f"{workload}-*.json")):
        r = json.loads(f.read_text())
        out.setdefault(r["mode"], []).append({"cluster": r["peak_cluster_memory_bytes"] / MiB,
                                              "largest": r["peak_worker_memory_bytes"] / MiB,
                                              "moved": r["transferred_bytes"] / MiB})
    return out


def cell(runs: list[dict], key: str) -> tuple[float, str]:
    values = [r[key] for r in runs]
    med = statistics.median(values)
    return med, f"{med:,.0f} ({min(values):,.0f}–{max(values):,.0f})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--real", action="append", required=True, help="LABEL=DIR of a scripts/bench.sh result")
    ap.add_argument("--sim", action="append", required=True, help="LABEL=DIR of dask-go-sim run records")
    args = ap.parse_args(argv)
    real = {label: real_runs(d, args.workload) for label, d in labelled(args.real)}
    sim = {label: sim_runs(d, args.workload) for label, d in labelled(args.sim)}
    print("| build | mode | runs real / sim | metric (MiB) | real | simulated | error |")
    print("|---|---|---:|---|---:|---:|---:|")
    for label in real:
        for mode in ("withholding", "coassign"):
            r, s = real[label].get(mode), sim.get(label, {}).get(mode)
            if not r or not s:
                continue
            for key, name in (("cluster", "cluster peak above start"), ("largest", "largest worker above its start"),
                              ("moved", "moved between workers")):
                rm, rt = cell(r, key)
                sm, st = cell(s, key)
                print(f"| {label} | {mode} | {len(r)} / {len(s)} | {name} | {rt} | {st} | {sm / rm - 1:+.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
