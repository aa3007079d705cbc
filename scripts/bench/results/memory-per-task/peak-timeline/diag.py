"""One graph-path run kept on disk, with an RSS timeline of the Go process
and its helper every 20 ms (timeline.tsv: seconds since the scheduler
started, Go MiB, helper MiB, their sum). Run with GODEBUG=gctrace=1 for the
Go collector's cycles in OUT/scheduler.log, on the same clock.

    GODEBUG=gctrace=1 flock -x /tmp/measure.lock .venv/bin/python \
        scripts/bench/results/memory-per-task/peak-timeline/diag.py tree-200k go:/path/to/binary OUT
"""
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # scripts/bench
import psutil  # noqa: E402

import graph_path  # noqa: E402
import procs  # noqa: E402

case, kind, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
out.mkdir(parents=True, exist_ok=True)
timeline = []
launch0 = procs.Scheduler.launch


def launch(self):
    r = launch0(self)
    p = psutil.Process(self.proc.pid)
    t0 = p.create_time()

    def loop():
        while self.proc.poll() is None:
            try:
                g = p.memory_info().rss
                h = sum(c.memory_info().rss for c in p.children(recursive=True))
                timeline.append((time.time() - t0, g, h))
            except psutil.Error:
                pass
            time.sleep(0.02)

    threading.Thread(target=loop, daemon=True).start()
    return r


procs.Scheduler.launch = launch
rec = graph_path.one_run(case, kind, graph_path.CASES[case][0], out, 900)
print(json.dumps({k: rec.get(k) for k in ("ok", "wall_s", "cpu_s", "peak_rss_bytes", "scheduler_peak_rss_bytes",
                                          "helper_peak_rss_bytes")}))
with open(out / "timeline.tsv", "w") as f:
    for t, g, h in timeline:
        f.write(f"{t:.3f}\t{g / 2**20:.1f}\t{h / 2**20:.1f}\t{(g + h) / 2**20:.1f}\n")
