#!/usr/bin/env python
"""Where and when each task ran, and how long finished outputs waited for
their consumers: the trace behind a memory difference once trace_memory.py
has shown *what* the workers hold (e.g. dot-product, where Go's withholding
held more than Python's).

    .venv/bin/python scripts/bench/trace_placement.py dot-product --configs py-queuing,go-queuing --scale 0.5

One fresh cluster per configuration and repetition, as the benchmark runs
them; the workload runs under distributed's get_task_stream. The graph's
dependencies come from the collection inside the workload's run(),
materialized as the client does (scripts/export-graph.py). Per producer
prefix: how long its outputs waited from the end of their compute until
their last consumer started (mean seconds, and GiB·s: bytes × wait, which
is what the waiting costs in memory over the run), and the share of
consumers that ran on another worker than the producer. Per consumer
prefix: how long after its last input was ready it started, and on how
many distinct workers its inputs were computed. Writes
RESULTS/placement-WORKLOAD.json (--results, default
scripts/bench/results/diagnostics) and prints the tables.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import Cluster  # noqa: E402
from procs import path_label  # noqa: E402
from workloads import WORKLOADS, Context  # noqa: E402


def export_graph_module():
    spec = importlib.util.spec_from_file_location("export_graph", HERE.parent / "export-graph.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["export_graph"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def dependencies(prepared) -> dict:
    """key -> keys it depends on, as the client submits the graph."""
    eg = export_graph_module()
    coll = eg._collection_in(prepared.run)
    if coll is None:
        raise SystemExit("trace_placement: no dask collection found in the workload's run()")
    dsk, _ = eg.materialize(coll)
    return {k: set(getattr(v, "dependencies", ()) or ()) for k, v in dsk.items()}


def run_traced(config: str, workload: str, ctx: Context, tmp: Path) -> dict:
    """One run on a fresh cluster under get_task_stream: per key that
    computed, its worker, compute start and stop, nbytes and the (start,
    stop) of the transfers that fetched its inputs; the graph's
    dependencies, the wall time and the result's check."""
    from distributed import get_task_stream

    prepared = WORKLOADS[workload](ctx)
    deps = dependencies(prepared)
    with Cluster(config, Path(tempfile.mkdtemp(prefix=f"trace-{path_label(config)}-", dir=tmp)), 4, 2**30) as c:
        t0 = time.perf_counter()
        with get_task_stream(client=c.client) as ts:
            value = prepared.run(c.client, 900)
        wall = time.perf_counter() - t0
        records = list(ts.data)
    ran = {}
    for r in records:
        comp = [s for s in r.get("startstops", ()) if s.get("action") == "compute"]
        if comp:
            ran[r["key"]] = {"worker": r["worker"], "start": comp[0]["start"], "stop": comp[-1]["stop"],
                             "nbytes": r.get("nbytes", 0) or 0,
                             "transfers": [(s["start"], s["stop"]) for s in r["startstops"]
                                           if s.get("action") == "transfer"]}
    return {"ran": ran, "deps": deps, "wall_s": wall, "problem": prepared.check(value)}


def trace_one(config: str, workload: str, ctx: Context, tmp: Path) -> dict:
    t = run_traced(config, workload, ctx, tmp)
    return {"configuration": config, "wall_s": t["wall_s"], "ok": t["problem"] is None, "error": t["problem"],
            "summary": summarize(t["ran"], t["deps"]), "tasks": len(t["ran"])}


def prefix_of(key) -> str:
    from dask.utils import key_split

    return key_split(key)


def summarize(ran: dict, deps: dict) -> dict:
    consumers = defaultdict(list)
    for k, ds in deps.items():
        for d in ds:
            consumers[d].append(k)
    prod = defaultdict(lambda: {"n": 0, "wait": [], "gib_s": 0.0, "moved": 0, "edges": 0})
    cons = defaultdict(lambda: {"n": 0, "delay": [], "input_workers": []})
    for k, info in ran.items():
        p = prefix_of(k)
        cs = [ran[c] for c in consumers.get(k, ()) if c in ran]
        if cs:
            wait = max(0.0, max(c["start"] for c in cs) - info["stop"])
            row = prod[p]
            row["n"] += 1
            row["wait"].append(wait)
            row["gib_s"] += wait * info["nbytes"] / 2**30
            row["edges"] += len(cs)
            row["moved"] += sum(c["worker"] != info["worker"] for c in cs)
        ins = [ran[d] for d in deps.get(k, ()) if d in ran]
        if len(ins) >= 2:
            row = cons[p]
            row["n"] += 1
            row["delay"].append(max(0.0, info["start"] - max(i["stop"] for i in ins)))
            row["input_workers"].append(len({i["worker"] for i in ins}))
    out = {"producers": {}, "consumers": {}}
    for p, r in prod.items():
        out["producers"][p] = {"tasks": r["n"], "mean_wait_s": statistics.fmean(r["wait"]),
                               "median_wait_s": statistics.median(r["wait"]), "gib_s": r["gib_s"],
                               "consumers_elsewhere": r["moved"] / r["edges"] if r["edges"] else 0.0}
    for p, r in cons.items():
        out["consumers"][p] = {"tasks": r["n"], "mean_delay_s": statistics.fmean(r["delay"]),
                               "mean_input_workers": statistics.fmean(r["input_workers"])}
    return out


def table(runs: list[dict]) -> str:
    lines = ["| configuration | rep | wall s | producer | tasks | mean wait s | median wait s | GiB·s waiting | consumers on another worker |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in runs:
        for p, s in sorted(r["summary"]["producers"].items(), key=lambda kv: -kv[1]["gib_s"])[:4]:
            lines.append(f"| {r['configuration']} | {r['rep']} | {r['wall_s']:.1f} | {p} | {s['tasks']} | {s['mean_wait_s']:.2f} | "
                         f"{s['median_wait_s']:.2f} | {s['gib_s']:.1f} | {s['consumers_elsewhere']:.0%} |")
    lines += ["", "| configuration | rep | consumer (≥ 2 inputs) | tasks | mean start delay after last input s | mean workers its inputs ran on |",
              "|---|---:|---|---:|---:|---:|"]
    for r in runs:
        for p, s in sorted(r["summary"]["consumers"].items(), key=lambda kv: -kv[1]["tasks"])[:4]:
            lines.append(f"| {r['configuration']} | {r['rep']} | {p} | {s['tasks']} | {s['mean_delay_s']:.2f} | {s['mean_input_workers']:.2f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--configs", default="py-queuing,go-queuing")
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--repetitions", type=int, default=1)
    ap.add_argument("--results", type=Path, default=HERE / "results" / "diagnostics")
    args = ap.parse_args()
    ctx = Context(memory=4 * 2**30, nthreads=4, smoke=False, scale=args.scale)
    runs = []
    with tempfile.TemporaryDirectory(prefix="trace-placement-") as tmp:
        for rep in range(args.repetitions):
            for config in args.configs.split(","):
                run = trace_one(config, args.workload, ctx, Path(tmp))
                run["rep"] = rep
                runs.append(run)
                print(f"{config} rep {rep}: {run['wall_s']:.1f} s, {run['tasks']} tasks, ok={run['ok']}", flush=True)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"placement-{args.workload}.json").write_text(json.dumps(runs, indent=1))
    print(table(runs))
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
