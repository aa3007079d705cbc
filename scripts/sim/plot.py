#!/usr/bin/env python
"""Plots of scripts/sim/results/latest.json: for each workload (and scale),
makespan, peak cluster memory, peak worker memory and bytes transferred
against n_workers, one line per mode. Writes RESULTS/plots/WORKLOAD-SCALE.png.

    .venv/bin/python scripts/sim/plot.py [--results scripts/sim/results]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ["off", "main", "withholding", "coassign"]
PANELS = [
    ("makespan_s", "makespan (s)", 1),
    ("peak_cluster_memory_bytes", "peak cluster memory (GiB)", 2**30),
    ("peak_worker_memory_bytes", "peak worker memory (GiB)", 2**30),
    ("transferred_bytes", "bytes transferred (GiB)", 2**30),
]


def main(argv=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    recs = [r for r in json.loads((args.results / "latest.json").read_text()) if "error" not in r]
    groups = defaultdict(list)
    for r in recs:
        groups[(r["workload"], r["scale"])].append(r)
    out = args.results / "plots"
    out.mkdir(parents=True, exist_ok=True)
    for (wl, scale), rs in sorted(groups.items()):
        fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.6))
        for ax, (field, label, div) in zip(axes, PANELS):
            for mode in MODES:
                pts = sorted((r["n_workers"], r[field] / div) for r in rs if r["mode"] == mode)
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=mode)
            ax.set_xscale("log")
            ax.set_xlabel("n_workers")
            ax.set_title(label, fontsize=10)
            ax.grid(alpha=0.3)
        n_tasks = rs[0]["n_tasks"]
        fig.suptitle(f"{wl} ({scale}, {n_tasks} tasks): simulated, real engine")
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        path = out / f"{wl.replace(':', '_')}-{scale}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    main()
