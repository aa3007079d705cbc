#!/usr/bin/env python
"""Why a consumer's inputs wait on a stock worker: when it was ready, when
its fetched inputs arrived, and what its worker ran before starting it (the
trace behind the simulator's vorticity miss, scripts/sim/results/validation-notes.md).

    .venv/bin/python scripts/bench/trace_waits.py vorticity --config go-noqueue --consumer sum \\
        --pair rechunk-merge --repetitions 2 --results scripts/sim/results/vorticity-trace

One fresh cluster per repetition (4 workers × 1 thread × 1 GiB, as the
benchmark runs them), traced as trace_placement.py traces (run_traced). Per consumer task
(prefix --consumer):
* local / remote: whether its last-finished input was computed on its own
  worker; the time from that input's end to the consumer's start, from it
  to the first transfer, the transfers' duration, and from the last
  transfer's end to the start (the worker had the data and ran other tasks
  first);
* the longest waits after the data arrived, with what that worker started
  meanwhile, by prefix, and where the consumer's inputs were computed;
* with --pair P: how many consumers have their two P inputs computed on one
  worker, and how far apart those two finished.
Writes RESULTS/waits-WORKLOAD.json and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import trace_placement as tp  # noqa: E402
from workloads import WORKLOADS, Context  # noqa: E402


def run_once(workload: str, config: str, tmp: Path) -> tuple[dict, dict]:
    t = tp.run_traced(config, workload, Context(memory=4 * 2**30, nthreads=4, smoke=False, scale=0.5), tmp)
    if t["problem"] is not None:
        raise SystemExit(f"trace_waits: {workload} gave a wrong result: {t['problem']}")
    return t["ran"], t["deps"]


def stats(xs: list[float]) -> dict:
    return {"n": len(xs), "median_s": statistics.median(xs), "mean_s": statistics.fmean(xs),
            "max_s": max(xs)} if xs else {"n": 0}


def analyse(ran: dict, deps: dict, consumer: str, pair: str | None) -> dict:
    t0 = min(v["start"] for v in ran.values())
    kinds = {"local": [], "remote": []}
    after_arrival = []
    for k, v in ran.items():
        if tp.prefix_of(k) != consumer:
            continue
        ins = [d for d in deps.get(k, ()) if d in ran]
        if not ins:
            continue
        last = max(ins, key=lambda d: ran[d]["stop"])
        ready = ran[last]["stop"]
        row = {"delay": v["start"] - ready}
        if v["transfers"]:
            tstart = min(a for a, _ in v["transfers"])
            tstop = max(b for _, b in v["transfers"])
            row.update(to_transfer=tstart - ready, transfer=tstop - tstart, after=v["start"] - tstop)
            after_arrival.append((v["start"] - tstop, k, tstop))
        kinds["remote" if ran[last]["worker"] != v["worker"] else "local"].append(row)
    out = {"consumer": consumer}
    for kind, rows in kinds.items():
        out[kind] = {f: stats([r[f] for r in rows if f in r]) for f in ("delay", "to_transfer", "transfer", "after")}
    worst = []
    for wait, k, tstop in sorted(after_arrival, key=lambda x: x[0], reverse=True)[:6]:
        v = ran[k]
        meanwhile = Counter(tp.prefix_of(kk) for kk, vv in ran.items()
                            if vv["worker"] == v["worker"] and tstop <= vv["start"] < v["start"])
        inputs = {}
        for d in deps.get(k, ()):
            if d in ran:
                inputs.setdefault(tp.prefix_of(d), []).append(ran[d]["worker"])
        worst.append({"wait_s": wait, "at_s": tstop - t0, "worker": v["worker"], "ran_meanwhile": dict(meanwhile),
                      "inputs_computed_on": inputs})
    out["longest_after_arrival"] = worst
    if pair:
        same, gaps = 0, []
        for k in ran:
            if tp.prefix_of(k) != consumer:
                continue
            ps = [d for d in deps.get(k, ()) if d in ran and tp.prefix_of(d) == pair]
            if len(ps) == 2:
                same += ran[ps[0]]["worker"] == ran[ps[1]]["worker"]
                gaps.append(abs(ran[ps[0]]["stop"] - ran[ps[1]]["stop"]))
        out["pair"] = {"prefix": pair, "consumers": len(gaps), "on_one_worker": same, "finish_gap": stats(gaps)}
    return out


def show(a: dict) -> str:
    lines = []
    for kind in ("local", "remote"):
        r = a[kind]
        parts = [f"{f} median {s['median_s'] * 1e3:.0f} ms, mean {s['mean_s'] * 1e3:.0f} ms, max {s['max_s']:.2f} s"
                 for f, s in r.items() if s["n"]]
        lines.append(f"  {kind} ({r['delay']['n']} tasks): " + "; ".join(parts))
    for w in a["longest_after_arrival"]:
        lines.append(f"  waited {w['wait_s']:.2f} s after its data (t={w['at_s']:.1f} s) on {w['worker']}; "
                     f"the worker started meanwhile {w['ran_meanwhile']}; its inputs were computed on "
                     f"{w['inputs_computed_on']}")
    if "pair" in a:
        p = a["pair"]
        g = p["finish_gap"]
        lines.append(f"  {p['consumers']} with two {p['prefix']} inputs, {p['on_one_worker']} of them on one worker; "
                     f"finish gap median {g['median_s'] * 1e3:.0f} ms, mean {g['mean_s'] * 1e3:.0f} ms, max {g['max_s']:.2f} s")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--config", default="go-noqueue")
    ap.add_argument("--consumer", required=True, help="task prefix of the consumers to follow")
    ap.add_argument("--pair", help="input prefix: count consumers whose two such inputs ran on one worker")
    ap.add_argument("--repetitions", type=int, default=1)
    ap.add_argument("--results", type=Path, default=HERE / "results" / "diagnostics")
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="trace-waits-") as tmp:
        for rep in range(args.repetitions):
            ran, deps = run_once(args.workload, args.config, Path(tmp))
            a = analyse(ran, deps, args.consumer, args.pair)
            a.update(rep=rep, config=args.config, workload=args.workload, tasks=len(ran))
            runs.append(a)
            print(f"{args.workload} {args.config} rep {rep}: {len(ran)} tasks\n{show(a)}", flush=True)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"waits-{args.workload}.json").write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
