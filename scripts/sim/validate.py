#!/usr/bin/env python
"""Validation: simulated vs measured, at the benchmark suite's small scale.

    .venv/bin/python scripts/sim/validate.py \\
        --bench scripts/sim/results/calibration/records.json [MORE.json ...] \\
        [--timeseries FILE ...] [--sim scripts/sim/results/small/latest.json] [--max-foreign 0.25]

--bench takes one or more benchmark result files (scripts/bench's
latest.json, scripts/bench/calibrate_runs.py's records.json: one record per
run with workload, configuration, repetition, wall_s, peak_memory_bytes).
A later file replaces the earlier files' records of every (workload,
configuration) it has: a fresh benchmark of one configuration (say
go-queuing-coassign after a change to co-assignment) is validated by adding
its file at the end. Baselines (the workers' summed RSS when the run
started) come from the timeseries.json next to each bench file, or from
--timeseries files (merged in order).

Matches go-noqueue/main, go-queuing/withholding and
go-queuing-coassign/coassign against the simulator's small-scale records
and writes scripts/sim/results/validation.md:

* per workload and mode: the real median and range (min-max over the
  runs), the simulated value and the error, for makespan (wall time) and
  peak memory (the workers' summed RSS above their idle start: what the
  simulator models);
* the ranks of the three modes, real and simulated, per workload and
  metric. Two modes whose real ranges overlap are tied (the run-to-run
  spread does not separate them: "=" in the table) and either simulated
  order is accepted for that pair; every other pair must be ordered the
  same way in the simulation.

Runs during which other processes took more than --max-foreign of the
machine's CPU (records with foreign_cpu_s, from calibrate_runs.py) are left
out and counted: another user's benchmark on the same two cores slows a
run by up to 2x.
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
MODES = ["main", "withholding", "coassign"]
GiB = 2**30


def load(path):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None


def merge_bench(paths, pool=()):
    """Records of every file; a later file's (workload, configuration)
    replaces the earlier files' records of it, except that the files in
    pool add theirs (more runs of the same build). Each record remembers
    its file (for its timeseries)."""
    merged: dict[tuple, list] = {}
    for p in [*paths, *pool]:
        recs = load(p)
        if recs is None:
            raise SystemExit(f"validate: {p} does not exist")
        fresh = defaultdict(list)
        for r in recs:
            if r.get("configuration") in PAIRS and "wall_s" in r and r.get("ok", True):
                fresh[(r["workload"], r["configuration"])].append({**r, "_file": str(p)})
        if p in pool:
            for k, v in fresh.items():
                merged.setdefault(k, []).extend(v)
        else:
            merged.update(fresh)
    return merged


def merge_series(bench_paths, extra):
    """run key -> timeseries: each bench file's sibling timeseries.json, then
    the --timeseries files, later ones overriding."""
    out = {}
    for p in [Path(b).parent / "timeseries.json" for b in bench_paths] + list(extra or []):
        s = load(p)
        if s:
            out.update({(str(p.parent) if p.name == "timeseries.json" else "", k): v for k, v in s.items()})
            out.update({("", k): v for k, v in s.items()})
    return out


def newest_binary(measured, configs):
    """For the configurations named, keep only the runs of the newest
    scheduler build among their records (calibrate_runs.py records the Go
    binary's mtime: the co-assignment code changes between builds, main and
    withholding do not). Returns the number of runs dropped."""
    dropped = 0
    for (wl, cfg), runs in measured.items():
        if cfg not in configs:
            continue
        stamps = [m for r in runs if (m := (r.get("scheduler_binary") or {}).get("mtime")) is not None]
        if not stamps:
            continue
        keep = [r for r in runs if (r.get("scheduler_binary") or {}).get("mtime") == max(stamps)]
        dropped += len(runs) - len(keep)
        measured[(wl, cfg)] = keep
    return dropped


def baseline(series, r):
    """The workers' summed RSS when the run started (idle processes)."""
    k = f"{r['workload']}|{r['configuration']}|{r['repetition']}"
    s = series.get((str(Path(r["_file"]).parent), k)) or series.get(("", k))
    return s["worker_rss"][0] if s and s.get("worker_rss") else None


def foreign_share(r):
    span = r.get("run_t1", 0) - r.get("run_t0", 0)
    return (r.get("foreign_cpu_s") or 0) / (2 * span) if span > 0 else 0.0


def sim_peak(s, sampled):
    """The simulated peak: the model's peak (every instant), or with
    sampled the cluster's memory sampled every 0.1 s, as the benchmark's
    Sampler samples the workers' RSS (peak_cluster_sampled_bytes, which
    records made before the simulator sampled lack)."""
    if not sampled:
        return s["peak_cluster_memory_bytes"]
    if "peak_cluster_sampled_bytes" not in s:
        raise SystemExit(f"--sampled-peak: a simulated record of {s['workload']} {s['mode']} has no "
                         "peak_cluster_sampled_bytes (made before the simulator sampled; re-run the sweep)")
    return s["peak_cluster_sampled_bytes"]


def rows_for(measured, simulated, series, max_foreign, sampled=False):
    """(workload, mode) -> row with the real runs' values and the simulated ones."""
    rows = {}
    for (wl, cfg), runs in sorted(measured.items()):
        mode = PAIRS[cfg]
        sims = simulated.get((wl, mode))
        kept = [r for r in runs if foreign_share(r) <= max_foreign]
        if not sims or not kept:
            continue
        walls = [r["wall_s"] for r in kept]
        above = [r["peak_memory_bytes"] - b for r in kept if (b := baseline(series, r)) is not None]
        rows[(wl, mode)] = {"n": len(kept), "dropped": len(runs) - len(kept),
                            "wall": walls, "above": above,
                            "sim_walls": [s["makespan_s"] for s in sims],
                            "sim_peaks": [sim_peak(s, sampled) for s in sims]}
    return rows


def ranks(values, ties=None):
    """Competition ranks (1 = smallest); tied pairs share the better rank."""
    out = {}
    for m, v in values.items():
        out[m] = 1 + sum(1 for o, w in values.items() if o != m and w < v and not (ties and ties(m, o)))
    return out


def overlap(a, b):
    return min(a) <= max(b) and min(b) <= max(a)


def order_check(real, sim):
    """Every pair of modes the real ranges separate must be ordered the same
    way in the simulation; returns (ok, the pairs that disagree)."""
    bad = []
    modes = [m for m in MODES if m in real]
    for i, a in enumerate(modes):
        for b in modes[i + 1:]:
            if overlap(real[a], real[b]):
                continue
            if (statistics.median(real[a]) < statistics.median(real[b])) != (sim[a] < sim[b]):
                bad.append(f"{a}/{b}")
    return not bad, bad


def strict_order(real, sim):
    """The modes sorted by real median and by simulated value (ties ignored)."""
    by_real = sorted(real, key=lambda m: statistics.median(real[m]))
    by_sim = sorted(sim, key=lambda m: sim[m])
    return " < ".join(by_real), " < ".join(by_sim)


def err(sim, real):
    return 100 * (sim - real) / real if real else float("nan")


def table(rows, metric):
    """Markdown rows for metric 'wall' or 'above', and the summary counts."""
    key_sim = "sim_walls" if metric == "wall" else "sim_peaks"
    unit = (lambda v: f"{v:.1f}") if metric == "wall" else (lambda v: f"{v / GiB:.2f}")
    lines, within, total, orders = [], 0, 0, []
    for wl in sorted({w for w, _ in rows}):
        real = {m: rows[(wl, m)][metric] for m in MODES if (wl, m) in rows and rows[(wl, m)][metric]}
        sims = {m: rows[(wl, m)][key_sim] for m in real}
        sim = {m: statistics.median(v) for m, v in sims.items()}
        if not real:
            continue
        med = {m: statistics.median(v) for m, v in real.items()}
        rr = ranks(med, lambda a, b: overlap(real[a], real[b]))
        sr = ranks(sim)
        ok, bad = order_check(real, sim)
        orders.append((wl, ok, bad, *strict_order(real, sim)))
        for m in MODES:
            if m not in real:
                continue
            e = err(sim[m], med[m])
            total += 1
            within += abs(e) <= 30
            tied = [o for o in real if o != m and overlap(real[m], real[o])]
            row = rows[(wl, m)]
            runs = f"{row['n']}" + (f" (-{row['dropped']})" if row["dropped"] else "")
            lines.append(f"| {wl} | {m} | {runs} | "
                         f"{unit(med[m])} | {unit(min(real[m]))}–{unit(max(real[m]))} | {unit(sim[m])}"
                         + (f" ({unit(min(sims[m]))}–{unit(max(sims[m]))})" if len(sims[m]) > 1 else "")
                         + f" | {e:+.0f}% "
                         f"{'✓' if abs(e) <= 30 else '✗'} | {rr[m]}{' =' + ','.join(tied) if tied else ''} | {sr[m]} | "
                         f"{'ok' if ok else 'WRONG: ' + ', '.join(bad)} |")
    return lines, within, total, orders


HEADER = """# Validation: simulated vs measured (benchmark suite, small scale)

Regenerate (scripts/sim/README.md, Validation, has the full sequence incl. the full-scale sweep):

    .venv/bin/python scripts/bench/calibrate_runs.py --workloads anom-mean,basic-sum,climactic-mean,vorticity \\
        --configs go-noqueue,go-queuing,go-queuing-coassign --repetitions 4 --scale 0.5 --results scripts/sim/results/calibration
    for w in anom-mean basic-sum climactic-mean vorticity; do
      .venv/bin/python scripts/export-graph.py $w --scale small --bench-scale 0.5 --out scripts/sim/graphs/$w-small-model.jsonl.gz
    done
    .venv/bin/python scripts/sim/calibrate.py
    for w in anom-mean basic-sum climactic-mean vorticity; do
      .venv/bin/python scripts/export-graph.py $w --scale small --bench-scale 0.5 --calibration scripts/sim/calibration.json
      for n in 2 3 4 5; do
        .venv/bin/python scripts/export-graph.py $w --scale small --bench-scale 0.5 --calibration scripts/sim/calibration.json \\
            --hash-seed $n --out scripts/sim/graphs/hash-seeds/$n
      done
    done
    go build -o bin/dask-go-sim ./cmd/dask-go-sim && rm -rf scripts/sim/results/small scripts/sim/results/small-seeds
    for n in 1 2 3 4 5; do   # hash seed 1: the default graphs and results/small; 2-5 under hash-seeds/ and small-seeds/
      g=scripts/sim/graphs; r=scripts/sim/results/small
      [ $n = 1 ] || {{ g=$g/hash-seeds/$n; r=scripts/sim/results/small-seeds/$n; }}
      nice -n 19 bin/dask-go-sim sweep -scale small -graphs $g -workers 4 -threads 1 -memory-limit 1GiB -cores 2 \\
          -calibration scripts/sim/calibration.json -modes main,withholding,coassign -seed $n \\
          -workloads anom-mean,basic-sum,climactic-mean,vorticity -results $r
      bin/dask-go-sim report -results $r
    done
    scripts/bench.sh --workloads anom-mean,basic-sum,climactic-mean,vorticity \\
        --configs go-noqueue,go-queuing,go-queuing-coassign --repetitions 5 --scale 0.5 --no-overhead \\
        --results scripts/bench/results/validation-real   # the real side (a quiet machine, ~18 min)
    .venv/bin/python scripts/sim/validate.py --bench {bench}{pool} \\
        --sim scripts/sim/results/small/latest.json scripts/sim/results/small-seeds/{{2,3,4,5}}/latest.json

dask.order's priorities depend on Python's string hash seed, which each real run draws afresh
(both schedulers); the graphs are exported under hash seeds 1-5 and every simulated cell is the
median of the five runs (their range in brackets), against the median of the real runs. Each of
the five also draws its own worker speeds (-seed N, -worker-speed-spread from the calibration).

A fresh benchmark of some configurations (e.g. go-queuing-coassign after a change to co-assignment:
`scripts/bench.sh --workloads anom-mean,basic-sum,climactic-mean,vorticity --configs go-queuing-coassign --scale 0.5
--results DIR`) is validated by adding its file last, `--bench {bench} DIR/latest.json`: its records replace those
of the same workload and configuration (baselines from DIR/timeseries.json). Rebuild bin/dask-go-sim and re-run
the small sweeps first if the engine changed.
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", type=Path, nargs="+",
                    default=[HERE / "results" / "calibration" / "records.json"])
    ap.add_argument("--pool", type=Path, nargs="*", default=[],
                    help="benchmark files whose runs are added to those of --bench (more repetitions of the "
                         "same build), not substituted for them")
    ap.add_argument("--timeseries", type=Path, nargs="*", default=[])
    ap.add_argument("--sim", type=Path, nargs="+", default=[HERE / "results" / "small" / "latest.json"],
                    help="simulated small-scale records; with several (e.g. one sweep per hash seed of the "
                         "graphs, results/small-seeds/N/latest.json) each cell is their median, and their range "
                         "is shown")
    ap.add_argument("--workers", type=int, default=4, help="cluster size of the benchmark runs")
    ap.add_argument("--max-foreign", type=float, default=0.10,
                    help="leave out runs where other processes took more than this share of the 2 cores")
    ap.add_argument("--newest-binary", default="go-queuing-coassign",
                    help="configurations whose runs count only if made with the newest scheduler build among "
                         "their records (comma-separated; empty: all builds)")
    ap.add_argument("--sampled-peak", action="store_true",
                    help="hold the simulated cluster memory sampled every 0.1 s (as the benchmark samples RSS) "
                         "against the real peaks, instead of the model's peak at every instant")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "validation.md")
    ap.add_argument("--notes", type=Path, default=HERE / "results" / "validation-notes.md",
                    help="hand-written findings appended to the output (the misses and their causes), if it exists")
    args = ap.parse_args(argv)
    measured = merge_bench(args.bench, args.pool)
    old_builds = newest_binary(measured, {c for c in args.newest_binary.split(",") if c})
    series = merge_series([*args.bench, *args.pool], args.timeseries)
    simulated = defaultdict(list)
    for path in args.sim:
        for r in load(path) or []:
            if r.get("scale") == "small" and r.get("n_workers") == args.workers and "error" not in r:
                simulated[(r["workload"], r["mode"])].append(r)
    rows = rows_for(measured, simulated, series, args.max_foreign, args.sampled_peak)
    rel = lambda p: str(p.relative_to(ROOT)) if p.is_absolute() and ROOT in p.parents else str(p)  # noqa: E731
    lines = [HEADER.format(bench=" ".join(rel(p) for p in args.bench),
                           pool="".join(f" --pool {rel(p)}" for p in args.pool[:1])
                           + "".join(f" {rel(p)}" for p in args.pool[1:]))]
    if not rows:
        lines.append(f"Pending: no benchmark record in {', '.join(map(str, args.bench))} matches a simulated "
                     f"small-scale run in {', '.join(map(str, args.sim))}.")
        args.out.write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        return
    s0 = next(iter(simulated.values()))[0]
    dropped = sum(r["dropped"] for r in rows.values())
    lines += [
        f"Real: {', '.join(rel(p) for p in args.bench)}"
        + (f" with the runs of {', '.join(rel(p) for p in args.pool)} added" if args.pool else "")
        + ": 4 stock workers × 1 thread × 1 GiB on this 2-core "
        f"machine, bench scale 0.5; median and range (min–max) of the runs"
        + (f" ({old_builds} runs of {args.newest_binary} made with an older scheduler build left out)"
           if old_builds else "")
        + (f" ({dropped} runs left out: other processes took more than {args.max_foreign:.0%} of the machine's CPU"
           " during them, shown as (-n))" if dropped else "") + ". "
        f"Simulated: {', '.join(rel(p) for p in args.sim)}"
        + (" (each cell the median of these runs, their range in brackets)" if len(args.sim) > 1 else "")
        + f" (cores {s0.get('cores', 0)}, calibration "
        f"{s0.get('calibration') or 'none'}). Peak memory: the workers' summed RSS above their idle start "
        "(the first sample of the run) against the simulated cluster peak"
        + (" sampled every 0.1 s as the benchmark samples RSS (--sampled-peak). " if args.sampled_peak
           else " (at any instant; --sampled-peak: sampled every 0.1 s, as the benchmark samples RSS). ")
        + "Ranks: 1 = smallest; `=m` marks a real tie with mode m (ranges overlap), under which either simulated "
        "order is accepted; order = whether every pair the real ranges separate is simulated in the same order.",
        ""]
    summary = []
    for metric, title, unit in (("wall", "Makespan", "s"), ("above", "Peak memory above idle start", "GiB")):
        body, within, total, orders = table(rows, metric)
        lines += [f"## {title} ({unit})", "",
                  "| workload | mode | runs | real median | real range | sim | error | real rank | sim rank | order |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---|", *body, "",
                  "Medians in order, ignoring ties (real | simulated): "
                  + "; ".join(f"{wl}: {r} | {sm}{'' if r == sm else ' (differs)'}" for wl, _, _, r, sm in orders), ""]
        summary.append(f"{title.lower()}: {within}/{total} within ±30 %, mode order right on "
                       f"{sum(o[1] for o in orders)}/{len(orders)} workloads"
                       + "".join(f" ({o[0]}: {', '.join(o[2])} reversed)" for o in orders if not o[1]))
    lines[1:1] = ["Summary: " + "; ".join(summary) + ".", ""]
    if args.notes.exists():
        lines += [args.notes.read_text()]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
