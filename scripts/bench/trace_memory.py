#!/usr/bin/env python
"""What the workers hold over time, by task prefix: the trace behind a
memory difference between configurations: where Go is worse, the trace
says why. One fresh cluster per configuration, as the benchmark runs them;
every 0.5 s a second Client asks each stock worker (client.run) for the
keys in memory and executing, grouped by key_split, while the workload runs.

    .venv/bin/python scripts/bench/trace_memory.py anom-mean --configs go-queuing,go-queuing-coassign --scale 0.5

Writes RESULTS/trace-WORKLOAD.json and RESULTS/trace-WORKLOAD.png (RESULTS:
--results, default scripts/bench/results/diagnostics; stacked
bytes in memory per prefix over time, one panel per configuration).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Cluster  # noqa: E402
from procs import BENCH, known_config, path_label  # noqa: E402
from workloads import WORKLOADS, Context  # noqa: E402


def held_by_prefix(dask_worker) -> dict:
    """prefix -> [keys in memory, their bytes, tasks executing, keys in
    memory that were fetched (replicas: the worker has no run_spec for
    them)] on one worker."""
    from distributed.utils import key_split

    out: dict[str, list] = {}
    for ts in list(dask_worker.state.tasks.values()):
        if ts.state not in ("memory", "executing", "long-running"):
            continue
        row = out.setdefault(key_split(ts.key), [0, 0, 0, 0])
        if ts.state == "memory":
            row[0] += 1
            row[1] += ts.nbytes or 0
            row[3] += ts.run_spec is None
        else:
            row[2] += 1
    return out


def execute_seconds(dask_worker) -> dict:
    """prefix -> seconds spent executing its tasks on one worker (the
    worker's own fine metrics: every "execute" label measured in seconds)."""
    out: dict[str, float] = {}
    for key, value in list(dask_worker.digests_total.items()):
        if isinstance(key, tuple) and len(key) == 5 and key[0] == "execute" and key[4] == "seconds":
            out[key[2]] = out.get(key[2], 0.0) + value
    return out


def summed(per_worker: dict) -> dict:
    out: dict[str, float] = {}
    for w in per_worker.values():
        for p, v in w.items():
            out[p] = out.get(p, 0.0) + v
    return out


def trace_one(config: str, workload: str, ctx: Context, workers: int, memory_limit: int, tmp: Path) -> dict:
    from distributed import Client

    samples: list[dict] = []
    stop = threading.Event()
    with Cluster(config, Path(tempfile.mkdtemp(prefix=f"trace-{path_label(config)}-", dir=tmp)), workers, memory_limit) as c:
        prepared = WORKLOADS[workload](ctx)
        observer = Client(scheduler_file=str(c.scheduler.scheduler_file), timeout=60)
        t0 = time.perf_counter()

        def poll():
            while not stop.is_set():
                try:
                    per_worker = observer.run(held_by_prefix)
                    samples.append({"t": round(time.perf_counter() - t0, 2), "workers": per_worker})
                except Exception as e:  # noqa: BLE001 - a missed sample, not a failed trace
                    samples.append({"t": round(time.perf_counter() - t0, 2), "error": repr(e)})
                stop.wait(0.5)

        before = summed(c.client.run(execute_seconds))
        poller = threading.Thread(target=poll, name="trace-poller", daemon=True)
        poller.start()
        try:
            value = prepared.run(c.client, 900)
        finally:
            stop.set()
            poller.join(10)
            observer.close()
        wall = time.perf_counter() - t0
        after = summed(c.client.run(execute_seconds))
    problem = prepared.check(value)
    # what scripts/export-graph.py --durations-from reads: measured time per prefix
    spent = {p: round(v - before.get(p, 0.0), 4) for p, v in after.items() if v - before.get(p, 0.0) > 0}
    return {"configuration": config, "workload": workload, "wall_s": wall, "ok": problem is None,
            "error": problem, "execute_seconds_by_prefix": spent, "samples": samples}


def idle_share(run: dict) -> float:
    """The share of (sample, worker) pairs in which the worker executed
    nothing: threads left idle while the graph was running."""
    pairs = idle = 0
    for s in run["samples"]:
        for w in s.get("workers", {}).values():
            pairs += 1
            idle += not any(row[2] for row in w.values())
    return idle / pairs if pairs else 0.0


def summarize(run: dict, top: int = 6) -> str:
    """The sample with the most bytes in memory: its per-prefix split."""
    best, best_bytes = None, -1
    for s in run["samples"]:
        if "workers" not in s:
            continue
        total = sum(row[1] for w in s["workers"].values() for row in w.values())
        if total > best_bytes:
            best, best_bytes = s, total
    if best is None:
        return f"{run['configuration']}: no samples"
    by: dict[str, list] = {}
    for w in best["workers"].values():
        for p, row in w.items():
            acc = by.setdefault(p, [0, 0, 0, 0])
            for i, v in enumerate(row):  # traces written before the fetched column have 3
                acc[i] += v
    per_worker = [sum(row[1] for row in w.values()) / 2**20 for w in best["workers"].values()]
    lines = [f"{run['configuration']}: wall {run['wall_s']:.1f} s; idle worker-samples {idle_share(run):.0%}; "
             f"most bytes in memory at t={best['t']} s: "
             f"{best_bytes / 2**30:.2f} GiB, per worker MiB {[round(x) for x in per_worker]}"]
    for p, (n, b, ex, fetched) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"    {p:28} {n:5} keys ({fetched} fetched) {b / 2**20:8.0f} MiB  executing {ex}")
    return "\n".join(lines)


def plot(runs: list[dict], path: Path, top: int = 6) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    totals: dict[str, int] = {}
    for r in runs:
        for s in r["samples"]:
            for w in s.get("workers", {}).values():
                for p, row in w.items():
                    totals[p] = max(totals.get(p, 0), row[1])
    prefixes = [p for p, _ in sorted(totals.items(), key=lambda kv: -kv[1])[:top]]
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 3.8), sharey=True, squeeze=False)
    for ax, r in zip(axes[0], runs):
        ts = [s for s in r["samples"] if "workers" in s]
        t = [s["t"] for s in ts]
        layers = []
        for p in prefixes + ["other"]:
            layers.append([sum(row[1] for w in s["workers"].values() for q, row in w.items()
                               if (q == p if p != "other" else q not in prefixes)) / 2**30 for s in ts])
        ax.stackplot(t, layers, labels=prefixes + ["other"])
        ax.set_title(f"{r['workload']}: {r['configuration']}", fontsize=10)
        ax.set_xlabel("s")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("bytes in worker memory (GiB)")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> int:
    from dask.utils import parse_bytes

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=list(WORKLOADS))
    ap.add_argument("--configs", default="go-queuing,go-queuing-coassign")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--memory-limit", default="1GiB")
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--results", type=Path, default=BENCH / "results" / "diagnostics")
    ap.add_argument("--smoke", action="store_true", help="the workload's tiny smoke size (checks the script)")
    args = ap.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if not known_config(c):
            ap.error(f"unknown configuration {c!r}")
    limit = parse_bytes(args.memory_limit)
    ctx = Context(memory=args.workers * limit, nthreads=args.workers, smoke=args.smoke, scale=args.scale)
    tmp = Path(tempfile.mkdtemp(prefix="trace-"))
    runs = [trace_one(c, args.workload, ctx, args.workers, limit, tmp) for c in configs]
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"trace-{args.workload}.json").write_text(json.dumps(runs))
    plot(runs, args.results / f"trace-{args.workload}.png")
    for r in runs:
        print(summarize(r))
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
