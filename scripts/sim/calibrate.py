#!/usr/bin/env python
"""Calibrate the simulator from stock workers' traces.

    .venv/bin/python scripts/sim/calibrate.py [--traces scripts/sim/results/calibration/traces]
                                             [--graphs scripts/sim/graphs] [--out scripts/sim/calibration.json]

Reads the traces of scripts/bench/calibrate_runs.py (one file per real run:
every task's prefix, compute start/stop, output and input nbytes; the
workers' fine metrics; every transfer; managed bytes, RSS, executing tasks
and bytes in flight every 50 ms; CPU seconds of the worker processes) and
writes scripts/sim/calibration.json:

* "workloads" (per workload and task prefix: the same name is a different
  operation in another workload) and "prefixes" (pooled over workloads, for
  graphs not measured): the CPU a task costs as a throughput model,
  cpu = fixed + s_per_byte * (input + output bytes), from the workers'
  execute thread-cpu seconds (distributed's fine metrics: CPU time, so the
  wait for a core on the shared 2-core machine is not in it; the simulator
  adds that back with -cores). The fixed cost is common (the median CPU of
  tasks touching < 1 MiB); s_per_byte is the rest per byte. Pooled over
  workloads where a prefix ran at several chunk sizes, both terms are
  fitted. The output size is kept as a ratio to the export model's estimate
  ("out_ratio", read from the uncalibrated small graphs' headers) and to
  the measured input ("out_per_in"), so that it transfers to the full-size
  chunks; "transient_ratio" is the working memory of a running task per
  byte of its output (unmanaged memory while it runs, see
  transient_by_prefix).
* "sim": cluster-side terms for dask-go-sim -calibration: the worker CPU
  spent outside task execution, fitted over the runs as
  task_overhead_s * tasks + transfer_cpu_s * transfers +
  transfer_cpu_s_per_byte * bytes transferred (non-negative least squares);
  the wall time of a tiny transfer (transfer_wait_s, see transfer_wait());
  and the memory terms (see memory_terms()).

Every value is a constant per prefix or per operation, so it transfers to
the full-size graphs; nothing is fitted per workload.
"""

from __future__ import annotations

import argparse
import ast
import bisect
import glob
import gzip
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MiB = 2**20


def load_traces(pattern):
    out = []
    for path in sorted(glob.glob(pattern)):
        with gzip.open(path, "rt") as f:
            d = json.load(f)
        if d["record"].get("ok"):
            d["path"] = Path(path).name
            out.append(d)
    return out


def digest_items(w):
    for k, v in w["digests"].items():
        try:
            kk = ast.literal_eval(k)
        except (ValueError, SyntaxError):
            kk = k
        yield kk, v


def execute_cpu(run):
    """prefix -> (thread-cpu seconds, thread-noncpu seconds) over the run's workers."""
    out = defaultdict(lambda: [0.0, 0.0])
    for w in run["workers"].values():
        for k, v in digest_items(w):
            if isinstance(k, tuple) and len(k) == 5 and k[0] == "execute" and k[4] == "seconds":
                if k[3] == "thread-cpu":
                    out[k[2]][0] += v
                elif k[3] == "thread-noncpu":
                    out[k[2]][1] += v
    return out


def task_stats(run):
    """prefix -> [tasks, output bytes, input bytes, wall seconds]."""
    out = defaultdict(lambda: [0, 0, 0, 0.0])
    for w in run["workers"].values():
        for p, c0, c1, nb, nin, _nd in w["tasks"]:
            x = out[p]
            x[0] += 1
            x[1] += nb
            x[2] += nin
            x[3] += (c1 - c0) if c0 is not None else 0.0
    return out


def graph_header(graphs, workload):
    path = Path(graphs) / f"{workload}-small-model.jsonl.gz"
    if not path.exists():
        return None
    with gzip.open(path, "rt") as f:
        return json.loads(f.readline())


# ---- task costs --------------------------------------------------------------

def ratio(a, b):
    """a / b to 4 decimals, or to 4 significant digits when that rounds to
    0: a tiny output (climactic-mean's shuffle-taker, 453 bytes for 13 MB
    modelled) must not read as "no measurement"."""
    r = a / b
    return round(r, 4) or float(f"{r:.4g}")


def prefix_costs(runs, graphs):
    """Per (workload, prefix) and per prefix pooled over workloads: CPU per
    task as fixed + s_per_byte * bytes touched, the output size measured
    against the export model's estimate (out_ratio) and against the task's
    measured input (out_per_in, for outputs the model sizes by rule)."""
    points = defaultdict(lambda: defaultdict(lambda: [0, 0.0, 0.0, 0, 0]))  # prefix -> wl -> [n, cpu, noncpu, in, out]
    for run in runs:
        wl = run["record"]["workload"]
        cpu = execute_cpu(run)
        for p, (n, out, inb, _wall) in task_stats(run).items():
            x = points[p][wl]
            x[0] += n
            x[1] += cpu.get(p, (0, 0))[0]
            x[2] += cpu.get(p, (0, 0))[1]
            x[3] += inb
            x[4] += out
    # the common fixed cost: CPU per task of the prefixes that touch < 1 MiB
    small = [x[1] / x[0] for p in points for x in points[p].values() if x[0] and (x[3] + x[4]) / x[0] < MiB]
    fixed = statistics.median(small) if small else 0.0
    headers = {}
    per_wl = defaultdict(dict)
    pooled = {}
    for p, by_wl in sorted(points.items()):
        pts, ratios = [], []
        for wl, (n, cpu, noncpu, inb, outb) in sorted(by_wl.items()):
            if not n:
                continue
            if wl not in headers:
                headers[wl] = graph_header(graphs, wl)
            model = ((headers[wl] or {}).get("prefixes", {}).get(p) or {}).get("mean_nbytes")
            b, c = (inb + outb) / n, cpu / n
            # a task touching < 1 MiB costs what it costs: all fixed
            a, sl = (c, 0.0) if b < MiB else fit_line([(b, c)], fixed)
            e = {"fixed_s": a, "s_per_byte": sl,
                 "out_ratio": ratio(outb / n, model) if model else None,
                 "out_per_in": ratio(outb, inb) if inb else None,
                 "tasks": n, "bytes_per_task": round(b), "cpu_s_per_task": round(c, 6),
                 "noncpu_s_per_task": round(noncpu / n, 6), "out_bytes_per_task": round(outb / n)}
            per_wl[wl][p] = e
            pts.append((b, c))
            if e["out_ratio"] is not None:
                ratios.append(e["out_ratio"])
        a, sl = fit_line(pts, fixed)
        pooled[p] = {"fixed_s": a, "s_per_byte": sl, "out_ratio": statistics.median(ratios) if ratios else None,
                     "workloads": sorted(by_wl)}
    return fixed, dict(per_wl), pooled


def fit_line(pts, fixed):
    """cpu = a + s * bytes through the points: a least-squares line if
    the sizes differ by 20 % or more and the fit is non-negative, else the
    common fixed cost and the bytes-weighted slope above it."""
    if not pts:
        return fixed, 0.0
    xs = [b for b, _ in pts]
    if len(pts) >= 2 and max(xs) > 1.2 * min(xs):  # several sizes: fit both terms
        mx, my = statistics.fmean(xs), statistics.fmean(c for _, c in pts)
        sxx = sum((x - mx) ** 2 for x in xs)
        s = sum((x - mx) * (c - my) for x, (_, c) in zip(xs, pts)) / sxx
        a = my - s * mx
        if a >= 0 and s >= 0:
            return a, s
    tb = sum(b for b, _ in pts)
    extra = sum(max(0.0, c - fixed) for _, c in pts)
    return min(fixed, min(c for _, c in pts)), (extra / tb if tb else 0.0)


# ---- worker CPU outside task execution -----------------------------------------

def run_features(run):
    """What the worker processes did besides executing tasks: the terms of
    the overhead fit, and the CPU seconds to explain."""
    rec = run["record"]
    executed = sum(c for c, _ in execute_cpu(run).values())
    tasks = sum(x[0] for x in task_stats(run).values())
    transfers = [t for w in run["workers"].values() for t in w["transfers"]]
    return {"run": run["path"], "workload": rec["workload"], "configuration": rec["configuration"],
            "wall_s": rec["wall_s"], "worker_cpu_s": rec["worker_cpu_s"], "execute_cpu_s": executed,
            "other_cpu_s": rec["worker_cpu_s"] - executed, "tasks": tasks, "transfers": len(transfers),
            "transfer_bytes": sum(t["total"] for t in transfers),
            "transfer_wall_s": sum(t["stop"] - t["start"] for t in transfers),
            "foreign_cpu_s": rec.get("foreign_cpu_s"), "scheduler_side_cpu_s": rec.get("scheduler_side_cpu_s"),
            "machine_cpu_s": rec.get("machine_cpu_s")}


def nnls(rows, ys):
    """Non-negative least squares by active set on a handful of columns
    (no numpy needed; the problem is tiny)."""
    import itertools

    k = len(rows[0])
    best, best_err = [0.0] * k, sum(y * y for y in ys)
    for r in range(1, k + 1):
        for cols in itertools.combinations(range(k), r):
            coef = lstsq([[row[c] for c in cols] for row in rows], ys)
            if coef is None or any(c < 0 for c in coef):
                continue
            full = [0.0] * k
            for c, v in zip(cols, coef):
                full[c] = v
            err = sum((y - sum(a * b for a, b in zip(full, row))) ** 2 for row, y in zip(rows, ys))
            if err < best_err - 1e-12:
                best, best_err = full, err
    return best


def lstsq(X, y):
    """Normal equations with Gaussian elimination; None if singular."""
    k = len(X[0])
    A = [[sum(r[i] * r[j] for r in X) for j in range(k)] + [sum(r[i] * v for r, v in zip(X, y))] for i in range(k)]
    for i in range(k):
        piv = max(range(i, k), key=lambda r: abs(A[r][i]))
        if abs(A[piv][i]) < 1e-18:
            return None
        A[i], A[piv] = A[piv], A[i]
        for r in range(k):
            if r != i:
                f = A[r][i] / A[i][i]
                A[r] = [a - f * b for a, b in zip(A[r], A[i])]
    return [A[i][k] / A[i][i] for i in range(k)]


def overhead_fit(feats):
    """other_cpu_s = task_overhead * tasks + transfer_cpu * transfers +
    per_byte * bytes. Columns scaled to comparable magnitudes for the
    solver, then unscaled."""
    scale = [1e3, 1e3, 2**30]
    rows = [[f["tasks"] / scale[0], f["transfers"] / scale[1], f["transfer_bytes"] / scale[2]] for f in feats]
    coef = nnls(rows, [f["other_cpu_s"] for f in feats])
    per_task, per_transfer, per_byte = (c / s for c, s in zip(coef, scale))
    resid = [f["other_cpu_s"] - (per_task * f["tasks"] + per_transfer * f["transfers"] + per_byte * f["transfer_bytes"])
             for f in feats]
    return {"task_overhead_s": per_task, "transfer_cpu_s": per_transfer, "transfer_cpu_s_per_byte": per_byte,
            "residual_rms_s": (sum(r * r for r in resid) / len(resid)) ** 0.5,
            "other_cpu_s_mean": statistics.fmean(f["other_cpu_s"] for f in feats)}


def transfer_wait(runs, tiny=64 * 1024):
    """The wall time of transfers too small to cost CPU (< 64 KiB): what a
    transfer waits for besides moving bytes (both event loops getting a
    time slice on the shared cores)."""
    d = [t["stop"] - t["start"] for r in runs for w in r["workers"].values() for t in w["transfers"]
         if t["total"] < tiny]
    return {"median_s": statistics.median(d) if d else 0.0, "transfers": len(d)}


def transfer_bandwidth(runs, large=1_000_000):
    """The mean bytes per second of transfers over 1 MB: what a stock worker
    averages into its bandwidth estimate (Worker._update_metrics_received_data,
    an EWMA over those transfers) and reports in its heartbeats, from which
    the scheduler estimates transfer times when it places tasks."""
    bw = [t["total"] / max(0.001, t["stop"] - t["start"]) for r in runs for w in r["workers"].values()
          for t in w["transfers"] if t["total"] > large]
    return {"mean_bytes_s": statistics.fmean(bw) if bw else 0.0,
            "median_bytes_s": statistics.median(bw) if bw else 0.0, "transfers": len(bw)}


def worker_speed(runs, min_task_s=0.001):
    """How much the workers of one run differ in speed: per worker, its
    tasks' wall time over what the same tasks take at the run's median per
    prefix (tasks of prefixes whose median is under 1 ms left out: their
    wall time is mostly the event loop's). One worker runs persistently
    faster or slower than another on the shared cores (the four processes
    do not get equal shares of the two), which in runs without withholding
    lets the workers drift apart, so that a consumer's inputs computed on
    two of them wait for each other. The spread is the standard deviation
    of log(factor) about its run's mean, pooled over the runs (n - 1 per
    run)."""
    dev, dof, per_run = 0.0, 0, {}
    for r in runs:
        per_worker = [[(p, c1 - c0) for p, c0, c1, *_ in w["tasks"] if c0 is not None and c1 > c0]
                      for w in r["workers"].values()]
        walls = defaultdict(list)
        for tasks in per_worker:
            for p, d in tasks:
                walls[p].append(d)
        med = {p: statistics.median(v) for p, v in walls.items()}
        logs = []
        for tasks in per_worker:
            timed = [(d, med[p]) for p, d in tasks if med[p] > min_task_s]
            num, den = sum(d for d, _ in timed), sum(m for _, m in timed)
            if num > 0 and den > 0:
                logs.append(math.log(num / den))
        if len(logs) < 2:
            continue
        mean = statistics.fmean(logs)
        dev += sum((x - mean) ** 2 for x in logs)
        dof += len(logs) - 1
        per_run[r["path"]] = [round(math.exp(x - mean), 3) for x in logs]
    return {"sigma": math.sqrt(dev / dof) if dof else 0.0, "runs": len(per_run), "factors": per_run}


# ---- memory beyond managed data ------------------------------------------------

def memory_samples(run):
    """Per worker: [t, managed, unmanaged above the worker's first sample,
    bytes in flight to it, executing tasks' input bytes]."""
    out = {}
    for addr, w in run["workers"].items():
        s = w["samples"]
        if not s:
            continue
        base = s[0][2] - s[0][1]
        out[addr] = [[x[0], x[1], x[2] - x[1] - base, x[4], sum(b for _, b in x[3])] for x in s]
    return out


def at_peak(run):
    """Summed over workers at the sample instant with the largest summed
    RSS: managed, unmanaged above start, in flight."""
    per = memory_samples(run)
    if not per:
        return None
    times = sorted({round(x[0], 2) for s in per.values() for x in s})
    best = None
    for t in times[:: max(1, len(times) // 2000)]:
        tot = [0, 0, 0]
        for s in per.values():
            ts = [x[0] for x in s]
            i = max(0, bisect.bisect_right(ts, t) - 1)
            tot[0] += s[i][1]
            tot[1] += s[i][2]
            tot[2] += s[i][3]
        if best is None or tot[0] + tot[1] > best[1] + best[2]:
            best = (t, *tot)
    return {"managed": best[1], "unmanaged": best[2], "in_flight": best[3]}


def memory_terms(runs):
    """ReceiveEarly: the slope of unmanaged bytes on bytes in flight over
    every sample (a buffer being filled is in RSS before it is managed);
    WorkerUnmanaged: the median unmanaged growth of a worker in samples with
    nothing in flight, in the second half of the run (after warm-up of the
    allocator); WorkerIdle: the median RSS of a worker before its first
    task (the base its spill threshold counts from)."""
    xs, ys, quiet = [], [], []
    for run in runs:
        for s in memory_samples(run).values():
            n = len(s)
            for i, (t, _m, um, fl, _ex) in enumerate(s):
                xs.append(fl)
                ys.append(um)
                if fl == 0 and i > n // 2:
                    quiet.append(um)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    # a worker's RSS at its first sample, before the run's first task
    idle = [w["samples"][0][2] for run in runs for w in run["workers"].values() if w["samples"]]
    return {"in_flight_slope": slope, "quiet_unmanaged_median": statistics.median(quiet) if quiet else 0,
            "quiet_samples": len(quiet), "samples": len(xs),
            "idle_rss_median": statistics.median(idle) if idle else 0, "idle_samples": len(idle)}


def transient_by_prefix(runs):
    """prefix -> mean unmanaged bytes of a worker while one task of that
    prefix executes, above the same worker's level with nothing executing
    and nothing in flight (the median of those samples in that run): the
    task's working memory (its output being built, temporaries)."""
    acc = defaultdict(list)
    for run in runs:
        for addr, w in run["workers"].items():
            s = w["samples"]
            if not s:
                continue
            base = s[0][2] - s[0][1]
            idle = [x[2] - x[1] - base for x in s if not x[3] and not x[4]]
            if len(idle) < 5:
                continue
            level = statistics.median(idle)
            for x in s:
                if len(x[3]) == 1 and not x[4]:
                    acc[x[3][0][0]].append(x[2] - x[1] - base - level)
    return {p: (statistics.fmean(v), len(v)) for p, v in acc.items()}


# the same operation under another task name (dask.array's legacy
# random_sample and the Generator's random fill an array the same way);
# export-graph.py looks a prefix up here before falling back to the default
ALIASES = {"random_sample": "random"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(HERE / "results" / "calibration" / "traces" / "*.json.gz"))
    ap.add_argument("--graphs", type=Path, default=HERE / "graphs",
                    help="where the uncalibrated small graphs WORKLOAD-small-model.jsonl.gz are")
    ap.add_argument("--max-foreign", type=float, default=0.25,
                    help="cluster and memory terms: skip runs where other processes took more than this share "
                         "of the machine's CPU (another user's benchmark slows the workers unevenly and inflates "
                         "their CPU seconds); the overhead fit uses every run if fewer than 8 are left")
    ap.add_argument("--out", type=Path, default=HERE / "calibration.json")
    args = ap.parse_args(argv)
    runs = load_traces(args.traces)
    if not runs:
        sys.exit(f"calibrate: no successful traces match {args.traces}")
    clean = [r for r in runs if foreign_share(r) <= args.max_foreign]
    # task costs: per workload its quiet runs, all of its runs if none is quiet
    cost_runs = [r for r in runs if r in clean or not any(
        c["record"]["workload"] == r["record"]["workload"] for c in clean)]
    fixed, workloads, prefixes = prefix_costs(cost_runs, args.graphs)
    for wl, by_p in workloads.items():
        trans = transient_by_prefix([r for r in cost_runs if r["record"]["workload"] == wl])
        for p, c in by_p.items():
            if p in trans and c["out_bytes_per_task"] > MiB and trans[p][1] >= 20:
                c["transient_ratio"] = round(min(3.0, max(0.0, trans[p][0] / c["out_bytes_per_task"])), 3)
                c["transient_samples"] = trans[p][1]
    # default for unmeasured prefixes: the pooled CPU per byte above the fixed cost
    allpts = [c for by_p in workloads.values() for c in by_p.values()]
    tot_cpu = sum(c["cpu_s_per_task"] * c["tasks"] for c in allpts)
    tot_n = sum(c["tasks"] for c in allpts)
    tot_b = sum(c["bytes_per_task"] * c["tasks"] for c in allpts)
    default = {"fixed_s": fixed, "s_per_byte": max(0.0, tot_cpu - fixed * tot_n) / tot_b if tot_b else 0.0,
               "out_ratio": None, "transient_ratio": 1.0}
    # other load inflates the workers' own CPU seconds too (basic-sum
    # go-queuing: 27.6 s beside 2.3 s of foreign CPU, 38.6 s beside 10.5 s):
    # fit on the quiet runs when there are enough of them
    fit_runs = clean if len(clean) >= 8 else runs
    feats = [run_features(r) for r in fit_runs]
    over = overhead_fit(feats)
    mem = memory_terms(clean)
    wait = transfer_wait(clean or runs)
    bandwidth = transfer_bandwidth(clean or runs)
    speed = worker_speed(clean or runs)
    doc = {
        "command": " ".join(["scripts/sim/calibrate.py", *(argv if argv is not None else sys.argv[1:])]),
        "runs": [r["path"] for r in runs], "runs_for_task_costs": [r["path"] for r in cost_runs],
        "runs_for_cluster_terms": [r["path"] for r in fit_runs],
        "runs_for_memory_terms": [r["path"] for r in clean],
        "fixed_s": fixed, "default": default, "aliases": ALIASES, "workloads": workloads, "prefixes": prefixes,
        "sim": {"task_overhead_s": over["task_overhead_s"], "transfer_cpu_s": over["transfer_cpu_s"],
                "transfer_cpu_s_per_byte": over["transfer_cpu_s_per_byte"],
                "transfer_wait_s": wait["median_s"],
                "receive_early": mem["in_flight_slope"] > 0.5,
                "worker_unmanaged_bytes": int(max(0, mem["quiet_unmanaged_median"])),
                "worker_idle_bytes": int(mem["idle_rss_median"]),
                "engine_bandwidth_bytes_s": round(bandwidth["mean_bytes_s"]),
                "worker_speed_spread": round(speed["sigma"], 4)},
        "evidence": {"overhead_fit": over, "memory": mem, "tiny_transfers": wait, "large_transfers": bandwidth,
                     "worker_speed": speed, "per_run": feats,
                     "at_peak": {r["path"]: at_peak(r) for r in runs}},
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(runs)} runs ({len(clean)} with little foreign load) -> {args.out}")
    print(f"fixed {fixed * 1e3:.2f} ms/task; cluster terms {json.dumps(doc['sim'])}")
    print(f"overhead fit rms {over['residual_rms_s']:.2f} s of {over['other_cpu_s_mean']:.2f} s mean; memory {mem}")
    for wl, by_p in sorted(workloads.items()):
        for p, c in sorted(by_p.items(), key=lambda kv: -kv[1]["cpu_s_per_task"] * kv[1]["tasks"]):
            print(f"  {wl:15} {p:30} n {c['tasks']:5}  {c['bytes_per_task'] / MiB:7.1f} MiB  "
                  f"cpu {c['cpu_s_per_task'] * 1e3:7.2f} ms (+wait {c['noncpu_s_per_task'] * 1e3:7.2f})  "
                  f"{c['s_per_byte'] * 2**30:6.3f} s/GiB  out x{c['out_ratio']} (/in {c['out_per_in']})  "
                  f"transient x{c.get('transient_ratio')}")


def foreign_share(run):
    r = run["record"]
    span = r.get("run_t1", 0) - r.get("run_t0", 0)
    cores = r.get("cores") or 2
    return (r.get("foreign_cpu_s") or 0) / (span * cores) if span > 0 else 0.0


if __name__ == "__main__":
    main()
