#!/usr/bin/env python
"""How much task durations spread within a task prefix, in traced runs
(scripts/bench/calibrate_runs.py traces): per workload, configuration and
prefix the standard deviation of log(wall duration) over the run's tasks
(sigma of a log-normal; the median over runs), the median duration and the
time per run, and a time-weighted mean sigma per workload and configuration.

    .venv/bin/python scripts/sim/spread.py 'scripts/sim/results/solo/traces/*.json.gz'

Runs on one single-thread worker (results/solo) have no core contention, so
their spread is the tasks' own; the four-worker calibration traces add the
contention for this machine's two cores, which the simulator produces
itself (-cores). Compare with the simulator's -duration-spread.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate import load_traces  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", help="glob of WORKLOAD--CONFIG--REP.json.gz traces")
    ap.add_argument("--min-tasks", type=int, default=10, help="prefixes with fewer tasks in a run are skipped")
    args = ap.parse_args(argv)
    acc = defaultdict(list)  # (workload, config, prefix) -> [(sigma, n, seconds, median)]
    for run in load_traces(args.traces):
        rec = run["record"]
        by = defaultdict(list)
        for w in run["workers"].values():
            for prefix, t0, t1, *_ in w["tasks"]:
                if t0 is not None and t1 - t0 > 1e-4:
                    by[prefix].append(t1 - t0)
        for prefix, ds in by.items():
            if len(ds) >= args.min_tasks:
                logs = [math.log(d) for d in ds]
                acc[(rec["workload"], rec["configuration"], prefix)].append(
                    (statistics.pstdev(logs), len(ds), sum(ds), statistics.median(ds)))
    weighted = defaultdict(lambda: [0.0, 0.0])
    for (wl, cfg, prefix), runs in sorted(acc.items()):
        sigma = statistics.median(r[0] for r in runs)
        secs = statistics.fmean(r[2] for r in runs)
        print(f"{wl:15} {cfg:20} {prefix:28} sigma {sigma:.2f}  tasks/run {runs[0][1]:5}  "
              f"median {statistics.median(r[3] for r in runs) * 1e3:7.1f} ms  time/run {secs:6.1f} s")
        w = weighted[(wl, cfg)]
        w[0] += sigma * secs
        w[1] += secs
    for (wl, cfg), (s, t) in sorted(weighted.items()):
        print(f"{wl:15} {cfg:20} time-weighted sigma {s / t:.2f}")


if __name__ == "__main__":
    main()
