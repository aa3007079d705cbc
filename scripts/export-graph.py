#!/usr/bin/env python
"""Export a workload's task graph for the simulator (cmd/dask-go-sim).

    scripts/export-graph.py WORKLOAD --scale small|full [--out FILE] [--calibration scripts/sim/calibration.json]

The graph is built exactly as a stock Client builds it (collections_to_expr,
FinalizeCompute, optimize), then materialized and ordered like the Go
scheduler's materializer helper (compat/materializer.py): convert_legacy_graph
+ dask.order.order. Only the shape is built: arrays come from lazy da.zeros /
da.random, so a full-size graph (anom-mean: 10,000 chunks of 7.6 MiB;
vorticity: 6,000 chunks of 190 MiB) is exported without allocating any data.

Per task the file carries the dask key, dask.order's priority, dependency
indices, and a model's estimates: duration (s), output nbytes, and transient
bytes (working memory held only while the task runs). The model (see
estimate()):
  * output size: from the chunk sizes dask.array records on every array layer
    (HighLevelGraph collection_annotations: chunks, dtype); otherwise a rule per
    task prefix (reductions small, splits a fraction of their input, the rest
    the largest input);
  * duration: 1 ms overhead + bytes touched / a rate per prefix; root tasks
    generate one input chunk at the workload's generation rate; jobqueue uses
    the same seeded sleeps as scripts/bench/workloads.job.
With --calibration (scripts/sim/calibration.json, made by scripts/sim/calibrate.py
from stock workers' traces) the measured model replaces it per prefix: CPU
seconds = fixed + s_per_byte * (input + output bytes), output = the model's
estimate * the measured ratio, working memory while running = output *
the measured ratio (see Calibration).

Format (gzip, JSON lines): line 1 a header object (format
"daskgo-sim-graph/1", workload, scale, n_tasks, data_bytes, chunks,
hash_seed (the PYTHONHASHSEED dask.order ran under, --hash-seed), model,
prefixes), then one line per task:
    [key, order, [dependency line indices], duration_s, nbytes, transient]
where key is a string or a list (a dask tuple key).

--scale small uses scripts/bench/workloads.py (the benchmark suite's sizes:
4 workers x 1 GiB) so that simulated runs can be validated against
scripts/bench/results/latest.json; --scale full uses the original shapes.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import math
import os
import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
MiB = 2**20
GiB = 2**30
# The clusters the originals ran on: 10 workers x 2 threads, 76.66 GiB.
ORIGINAL_MEMORY = int(76.66 * GiB)
ORIGINAL_THREADS = 20


@dataclass
class Workload:
    collection: object
    data_bytes: int
    chunks: int
    root_rate: float  # bytes/s a root task generates its input chunk at
    chunk_bytes: int  # one input chunk (a root's transient working memory)
    task_model: Callable | None = None  # key -> (duration, nbytes, transient) or None
    notes: dict = field(default_factory=dict)


# ---- full-size workloads: the original shapes -------------------------------

def _rng(seed):
    import dask.array as da

    return da.random.default_rng(seed)


def _devnull(arr):
    """arr_to_devnull: every block consumed, one number kept."""
    import numpy as np

    return arr.map_blocks(lambda b: np.array(b.sum(), ndmin=b.ndim), chunks=(1,) * arr.ndim, dtype=float).sum()


def _nchunks(arr):
    return math.prod(len(c) for c in arr.chunks)


def full_anom_mean():
    import numpy as np
    import xarray as xr

    cols = 1_000_000  # 7.63 MiB rows
    data = _rng(1).random((10_000, cols), chunks=(1, cols))
    ngroups = data.shape[0] // 100
    arr = xr.DataArray(data, dims=["time", "x"], coords={"day": ("time", np.arange(data.shape[0]) % ngroups)})
    clim = arr.groupby("day").mean(dim="time")
    result = (arr.groupby("day") - clim).mean(dim="time")
    return Workload(result.data, data.nbytes, _nchunks(data), 250e6, cols * 8, notes={"groups": ngroups})


def full_basic_sum():
    import dask.array as da

    rows = 100 * MiB // 8
    data = da.zeros((rows, 3924), chunks=(rows, 1))
    return Workload(data.sum(axis=1), data.nbytes, _nchunks(data), 4e9, rows * 8)


def full_climactic_mean():
    import pandas as pd
    import xarray as xr

    chunks = (1, 1, 96, 21, 90, 144)
    data = _rng(2).random((28, 28, 96, 21, 90, 144), chunks=chunks)
    array = xr.DataArray(data, dims=["ensemble", "init_date", "lat", "lon", "lead_time", "time"],
                         coords={"init_date": pd.date_range(start="1960-01-01", periods=28, freq="MS")})
    result = array.groupby("init_date.month").mean(["ensemble", "init_date"])
    return Workload(result.data, data.nbytes, _nchunks(data), 250e6, math.prod(chunks) * 8)


def full_vorticity():
    import dask.array as da

    side, depth = 5000, 3000
    r = _rng(3)
    u = r.random((side, side, depth), chunks=(side, side, 1))
    v = r.random((side, side, depth), chunks=(side, side, 1))
    dx = r.random((side + 1, side), chunks=(side + 1, side))
    dy = r.random((side + 1, side), chunks=(side + 1, side))

    def pad_rechunk(arr):
        padded = da.pad(arr, pad_width=[(0, 1), (0, 0), (0, 0)], mode="wrap")
        new_chunks = list(padded.chunks)
        new_chunks[0] = side + 1
        return da.rechunk(padded, chunks=new_chunks)

    result = dx[..., None] * pad_rechunk(u) - dy[..., None] * pad_rechunk(v)
    return Workload(_devnull(result), u.nbytes + v.nbytes, _nchunks(u) + _nchunks(v), 250e6, side * side * 8)


def _timeseries(nbytes, ncols, freq_s, partition_freq, seed, extra=None):
    import dask
    import pandas as pd

    rows = max(10, int(nbytes // (8 * (ncols + 1))))
    start = pd.Timestamp("2020-01-01")
    end = start + pd.Timedelta(seconds=rows * freq_s)
    dtypes = {**(extra or {}), **{f"x{i}": float for i in range(ncols)}}
    return dask.datasets.timeseries(start=start, end=end, freq=f"{int(freq_s * 1000)}ms",
                                    partition_freq=partition_freq, dtypes=dtypes, seed=seed)


def full_dataframe_align():
    df = _timeseries(ORIGINAL_MEMORY // 2, 100, 0.6, "12h", 1)
    df2 = _timeseries(ORIGINAL_MEMORY // 4, 100, 0.6, "1h", 2)
    n = df.npartitions + df2.npartitions
    nbytes = ORIGINAL_MEMORY * 3 // 4
    return Workload((df2 - df).mean(), nbytes, n, 100e6, nbytes // n)


def full_shuffle():
    import dask

    nbytes = ORIGINAL_MEMORY
    df = _timeseries(nbytes, 10, 0.2, "2D", 7, {"id": int})  # ~83 MB partitions
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        # a per-partition result that depends on the partitioning: a plain
        # .sum() lets dask-expr drop the shuffle altogether
        coll = df.shuffle("id").map_partitions(lambda p: p["id"].nunique(), meta=("id", int)).sum().optimize()
    return Workload(coll, nbytes, df.npartitions, 100e6, nbytes // df.npartitions)


def _jobqueue(n, max_sleep):
    from dask import delayed

    def job(i, max_sleep):
        return i

    tasks = [delayed(job, pure=True)(i, max_sleep) for i in range(n)]
    total = delayed(sum)(tasks)

    def model(key):
        # the seeded draws of scripts/bench/workloads.job: size, then sleep
        if not (isinstance(key, str) and key.startswith("job-")) or key not in index:
            return None
        rng = random.Random(index[key])
        size = rng.randint(1, 2**24)
        return 0.001 + rng.uniform(0, max_sleep), 28, size

    index = {t.key: i for i, t in enumerate(tasks)}
    return Workload(total, 0, n, 1e9, 0, model, {"tasks": n})


def full_jobqueue():
    return _jobqueue(round(120 / 3 * ORIGINAL_THREADS), 3.0)


def full_map_overlap():
    x = _rng(6).random((10_000, 10_000), chunks=(50, 50))
    y = x.map_overlap(lambda b: b, depth=1, boundary="none")
    return Workload(_devnull(y), x.nbytes, _nchunks(x), 250e6, 50 * 50 * 8)


def full_double_diff():
    side = int(math.sqrt(ORIGINAL_MEMORY / 8))
    r = _rng(4)
    a = r.random((side, side), chunks="20MiB")
    b = r.random((side, side), chunks="20MiB")
    cb = math.prod(c[0] for c in a.chunks) * 8
    return Workload(_devnull(a[1:, 1:] - b[:-1, :-1]), a.nbytes + b.nbytes, _nchunks(a) + _nchunks(b), 250e6, cb)


def full_dot_product():
    side = int(math.sqrt(ORIGINAL_MEMORY / 17 / 8))
    a = _rng(5).random((side, side), chunks="128MiB")
    cb = math.prod(c[0] for c in a.chunks) * 8
    return Workload((a @ a.T).sum(), a.nbytes, _nchunks(a), 250e6, cb)


FULL = {
    "anom-mean": full_anom_mean,
    "basic-sum": full_basic_sum,
    "climactic-mean": full_climactic_mean,
    "dataframe-align": full_dataframe_align,
    "jobqueue": full_jobqueue,
    "shuffle": full_shuffle,
    "vorticity": full_vorticity,
    "map-overlap": full_map_overlap,
    "double-diff": full_double_diff,
    "dot-product": full_dot_product,
}

# Rates (bytes/s) of the generation step of each workload's roots.
ROOT_RATES = {"basic-sum": 4e9, "jobqueue": 1e9, "dataframe-align": 100e6, "shuffle": 100e6}


# ---- small workloads: the benchmark suite's ---------------------------------

def bench_workloads():
    """scripts/bench/workloads.py, imported once."""
    if "bench_workloads" in sys.modules:
        return sys.modules["bench_workloads"]
    spec = importlib.util.spec_from_file_location("bench_workloads", ROOT / "scripts" / "bench" / "workloads.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_workloads"] = mod
    spec.loader.exec_module(mod)
    return mod


def small(name, memory, nthreads, bench_scale=1.0):
    """The benchmark suite's workload, sized for its default cluster. The
    suite keeps the collection inside its run() closure; we take it from
    there (scripts/bench is read-only for us)."""
    mod = bench_workloads()
    ctx = mod.Context(memory=memory, nthreads=nthreads, smoke=False, scale=bench_scale)
    prep = mod.WORKLOADS[name](ctx)
    if name == "jobqueue":
        return _jobqueue(prep.chunks, 3.0)
    coll = _collection_in(prep.run)
    if coll is None:
        raise SystemExit(f"export-graph: no dask collection found in {name}'s run()")
    rate = ROOT_RATES.get(name, 250e6)
    return Workload(coll, prep.data_bytes, prep.chunks, rate, prep.data_bytes // max(prep.chunks, 1))


def _collection_in(fn, depth=0):
    import dask

    for cell in fn.__closure__ or ():
        v = cell.cell_contents
        if hasattr(v, "data") and dask.is_dask_collection(getattr(v, "data", None)):
            return v.data  # an xarray object
        if dask.is_dask_collection(v):
            return v
        if callable(v) and depth < 2:
            found = _collection_in(v, depth + 1)
            if found is not None:
                return found
    return None


# ---- materialize, as the client and the materializer helper do ---------------

def materialize(coll):
    import dask.order
    from dask._expr import FinalizeCompute
    from dask._task_spec import convert_legacy_graph
    from dask.base import collections_to_expr

    expr = FinalizeCompute(collections_to_expr([coll], True)).optimize()
    dsk = convert_legacy_graph(expr.__dask_graph__())
    return dsk, dask.order.order(dsk)


def array_layers(coll):
    """layer name -> (chunks, itemsize) from dask.array's layer annotations."""
    out = {}
    graph = getattr(coll, "dask", None)
    layers = getattr(graph, "layers", {}) or {}
    for name, layer in layers.items():
        ann = getattr(layer, "collection_annotations", None) or {}
        if "chunks" in ann and "dtype" in ann:
            out[name] = (ann["chunks"], getattr(ann["dtype"], "itemsize", 8))
    return out


REDUCE_WORDS = ("sum", "mean", "count", "chunk", "agg", "combine", "var", "std", "min", "max")


def topological(dsk):
    indeg = {k: len(v.dependencies) for k, v in dsk.items()}
    dependents = defaultdict(list)
    for k, v in dsk.items():
        for d in v.dependencies:
            dependents[d].append(k)
    todo = [k for k, n in indeg.items() if n == 0]
    out = []
    while todo:
        k = todo.pop()
        out.append(k)
        for d in dependents[k]:
            indeg[d] -= 1
            if indeg[d] == 0:
                todo.append(d)
    if len(out) != len(dsk):
        raise SystemExit("export-graph: the graph has a cycle")
    return out, dependents


class Calibration:
    """scripts/sim/calibration.json (scripts/sim/calibrate.py): per task
    prefix, CPU seconds = fixed_s + s_per_byte * (input + output bytes),
    the measured output size as a ratio to this model's estimate, and the
    bytes a running task holds as a ratio to its output. Prefixes it has
    not measured use an alias (the same operation under another name) or
    the pooled default."""

    def __init__(self, path, workload):
        self.path = Path(path)
        self.doc = json.loads(self.path.read_text())
        self.measured = self.doc.get("workloads", {}).get(workload, {})
        self.prefixes = self.doc["prefixes"]
        self.aliases = self.doc.get("aliases", {})
        self.default = self.doc["default"]
        self.used = Counter()

    def lookup(self, prefix):
        p = prefix if prefix in self.measured or prefix in self.prefixes else self.aliases.get(prefix, prefix)
        if p in self.measured:
            self.used[f"measured {p}"] += 1
            return self.measured[p]
        self.used[f"pooled {p}" if p in self.prefixes else "default"] += 1
        return self.prefixes.get(p, self.default)

    def task(self, prefix, inputs, nbytes, by_rule):
        """(duration, nbytes, transient) of one task from the model's nbytes
        (by_rule: sized by rule_nbytes, not by dask.array's chunks: then the
        measured output per input byte is the better transfer to other sizes)."""
        c = self.lookup(prefix)
        if by_rule and inputs and c.get("out_per_in") is not None:
            nbytes = sum(inputs) * c["out_per_in"]
        elif c.get("out_ratio") is not None:
            nbytes = nbytes * c["out_ratio"]
        duration = c["fixed_s"] + c["s_per_byte"] * (sum(inputs) + nbytes)
        return duration, nbytes, nbytes * c.get("transient_ratio", 1.0)


def estimate(w, dsk, layers, cal=None):
    """key -> (duration_s, nbytes, transient) in a topological pass. With a
    Calibration, durations, output sizes and working memory are the
    measured ones (jobqueue's seeded sleeps stay as they are)."""
    from dask.utils import key_split

    order, dependents = topological(dsk)
    est = {}
    for key in order:
        deps = dsk[key].dependencies
        custom = w.task_model(key) if w.task_model else None
        if custom is not None:
            est[key] = custom
            continue
        inputs = [est[d][1] for d in deps]
        nbytes = layer_nbytes(key, layers)
        by_rule = nbytes is None
        if by_rule:
            nbytes = rule_nbytes(key_split(key), deps, inputs, dependents, w)
        if cal is not None:
            duration, nbytes, transient = cal.task(key_split(key), inputs, nbytes, by_rule)
            est[key] = (duration, int(nbytes), int(transient))
            continue
        if not deps:
            transient = w.chunk_bytes
            duration = 0.001 + w.chunk_bytes / w.root_rate
        else:
            transient = 0
            duration = 0.001 + (sum(inputs) + nbytes) / 1e9
        est[key] = (duration, int(nbytes), int(transient))
    return est


def layer_nbytes(key, layers):
    if not isinstance(key, tuple) or key[0] not in layers:
        return None
    chunks, itemsize = layers[key[0]]
    idx = key[1:]
    if len(idx) != len(chunks):
        return None
    try:
        return math.prod(chunks[d][i] for d, i in enumerate(idx)) * itemsize
    except (IndexError, TypeError):
        return None


def rule_nbytes(prefix, deps, inputs, dependents, w):
    """Output size of a task dask.array has no chunks for (dataframes,
    delayed): splits a share of their input, reductions small, concats
    (shuffle stages) the sum of their inputs, the rest the largest input."""
    if not deps:
        return w.chunk_bytes
    p = prefix.lower()
    if "split" in p and len(deps) == 1:
        fan = max(1, len(dependents[next(iter(deps))]))
        return max(1, inputs[0] // fan)
    if any(s in p for s in REDUCE_WORDS) and max(inputs) > 64 * 1024:
        return 1024
    if len(deps) > 1 and any(s in p for s in ("stage", "shuffle", "concat", "merge", "join")):
        return sum(inputs)
    return max(inputs)


def json_key(key):
    if isinstance(key, tuple):
        return [json_key(k) for k in key]
    if isinstance(key, (str, int, float)):
        return key
    return str(key)


def measured_durations(path, keys):
    """prefix -> mean measured seconds per task, from a trace written by
    scripts/bench/trace_memory.py on the same workload and size: the
    workers' own execute time per prefix (mean over the traced
    configurations) divided by the graph's task count of that prefix."""
    from dask.utils import key_split

    runs = [r for r in json.loads(Path(path).read_text()) if r.get("ok") and r.get("execute_seconds_by_prefix")]
    if not runs:
        raise SystemExit(f"export-graph: {path} has no successful traced run with execute_seconds_by_prefix")
    counts = Counter(key_split(k) for k in keys)
    out = {}
    for p, n in counts.items():
        spent = [r["execute_seconds_by_prefix"].get(p) for r in runs]
        spent = [s for s in spent if s]
        if spent:
            out[p] = sum(spent) / len(spent) / n
    return out


def export(name, scale, out, memory, nthreads, bench_scale=1.0, durations_from=None, calibration=None,
           calibrate_as=None):
    from dask.utils import key_split

    t0 = time.monotonic()
    w = FULL[name]() if scale == "full" else small(name, memory, nthreads, bench_scale)
    dsk, prio = materialize(w.collection)
    layers = array_layers(w.collection)
    cal = Calibration(calibration, calibrate_as or name) if calibration else None
    est = estimate(w, dsk, layers, cal)
    if cal is not None:
        w.notes = {**w.notes, "calibration": {"from": str(cal.path.relative_to(ROOT) if cal.path.is_absolute()
                                                          and ROOT in cal.path.parents else cal.path),
                                              "tasks_by_entry": dict(cal.used)}}
    if durations_from:
        measured = measured_durations(durations_from, dsk)
        for k, (d, nb, tr) in est.items():
            est[k] = (measured.get(key_split(k), d), nb, tr)
        w.notes = {**w.notes, "durations_measured": {"from": Path(durations_from).name, "prefixes": measured}}
    keys = sorted(dsk, key=lambda k: prio[k])
    index = {k: i for i, k in enumerate(keys)}
    prefixes = defaultdict(lambda: [0, 0.0, 0])
    for k in keys:
        p = prefixes[key_split(k)]
        p[0] += 1
        p[1] += est[k][0]
        p[2] += est[k][1]
    header = {
        "format": "daskgo-sim-graph/1", "workload": name, "scale": scale, "n_tasks": len(keys),
        "data_bytes": int(w.data_bytes), "chunks": int(w.chunks), "notes": w.notes,
        "hash_seed": int(os.environ.get("PYTHONHASHSEED", "-1")),
        "model": ({"calibrated": True} if cal else
                  {"root_rate": w.root_rate, "chunk_bytes": w.chunk_bytes, "rate": 1e9, "overhead_s": 0.001}),
        "prefixes": {p: {"count": c, "mean_duration_s": d / c, "mean_nbytes": b // c}
                     for p, (c, d, b) in sorted(prefixes.items())},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", compresslevel=3) as f:
        f.write(json.dumps(header) + "\n")
        for k in keys:
            deps = sorted(index[d] for d in dsk[k].dependencies)
            d, nb, tr = est[k]
            f.write(json.dumps([json_key(k), prio[k], deps, round(d, 6), nb, tr], separators=(",", ":")) + "\n")
    kinds = Counter(type(dsk[k]).__name__ for k in keys)
    print(f"{name} ({scale}): {len(keys)} tasks, data {w.data_bytes / GiB:.2f} GiB in {w.chunks} chunks, "
          f"{dict(kinds)}, {time.monotonic() - t0:.1f} s -> {out}")
    return header


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", nargs="+", help=f"one of {', '.join(FULL)} or 'all' (small scale: any workload of "
                                               "scripts/bench/workloads.py)")
    ap.add_argument("--scale", choices=["small", "full"], default="full")
    ap.add_argument("--out", type=Path, help="output file (one workload) or directory")
    ap.add_argument("--memory", type=float, default=4.0, help="small scale: total worker memory, GiB (bench default 4)")
    ap.add_argument("--nthreads", type=int, default=4, help="small scale: total worker threads (bench default 4)")
    ap.add_argument("--durations-from", type=Path,
                    help="a scripts/bench/trace_memory.py result for this workload and size: "
                         "measured per-prefix durations replace the model's")
    ap.add_argument("--calibration", type=Path,
                    help="scripts/sim/calibration.json: measured per-prefix CPU cost, output size and working memory "
                         "replace the model's (scripts/sim/calibrate.py)")
    ap.add_argument("--calibrate-as", metavar="WORKLOAD",
                    help="with --calibration: use this workload's measured prefixes (a variant of a calibrated "
                         "workload, e.g. anom-persist as anom-mean: the same operations on other chunk sizes)")
    ap.add_argument("--hash-seed", type=int, default=1,
                    help="PYTHONHASHSEED to order the graph under: dask.order's priorities depend on the string "
                         "hash seed (the schedulers draw one per process), so a fixed one makes the export "
                         "reproducible (default 1; the process re-executes itself under it)")
    ap.add_argument("--bench-scale", type=float, default=1.0,
                    help="small scale: the benchmark's --scale the graph must match (the committed bench runs used 0.5)")
    args = ap.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != str(args.hash_seed):
        env = {**os.environ, "PYTHONHASHSEED": str(args.hash_seed)}
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()),
                                   *(argv if argv is not None else sys.argv[1:])], env)
    names = list(FULL) if args.workload == ["all"] else args.workload
    known = FULL if args.scale == "full" else bench_workloads().WORKLOADS  # small: every benchmark workload
    for n in names:
        if n not in known:
            ap.error(f"unknown workload {n!r} at scale {args.scale}; known: {', '.join(known)}")
    outdir = ROOT / "scripts" / "sim" / "graphs"
    for n in names:
        out = args.out if (args.out and len(names) == 1 and args.out.suffix == ".gz") else \
            (args.out or outdir) / f"{n}-{args.scale}.jsonl.gz"
        export(n, args.scale, out, int(args.memory * GiB), args.nthreads, args.bench_scale,
               args.durations_from if len(names) == 1 else None, args.calibration, args.calibrate_as)


if __name__ == "__main__":
    main()
