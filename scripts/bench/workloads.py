"""The benchmark workloads: our own versions of the coiled/benchmarks-style
workloads the dask withholding design discussion measured (anom_mean,
basic_sum, climactic_mean, dataframe_align, jobqueue, vorticity, plus
shuffle, map_overlap, double diff and dot product). shuffle-p2p and
dataframe-align-p2p run the dataframe work through P2P shuffles (dask's
default with a Client), so the scheduler's P2P side is measured too
(shuffle forces the task-based method; dataframe-align aligns by
repartitioning and never shuffles). P2P shards travel by
shuffle_receive, which the transferred-bytes counter does not see.

Each workload is sized from the cluster's total worker memory the way the
originals were (a multiple of it), times --scale; smoke mode uses tiny fixed
sizes. prepare() builds the collection in the client (not timed) and returns
a Prepared whose run(client) computes it (timed) and returns a checksum.
Random data comes from seeded generators, so the checksum is the same under
every scheduler; where the answer is known analytically, check() verifies it.

The module is imported by the scheduler, the Go scheduler's materializer and
the workers too (task functions below are pickled by reference).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

MiB = 2**20


@dataclass
class Context:
    memory: int  # total worker memory limit, bytes
    nthreads: int  # total worker threads
    smoke: bool
    scale: float = 1.0


@dataclass
class Prepared:
    data_bytes: int
    chunks: int
    run: Callable  # run(client, timeout) -> float checksum
    check: Callable[[float], str | None] = lambda value: None  # error text or None
    notes: dict = field(default_factory=dict)

    def describe(self) -> str:
        size = f"{self.data_bytes / 2**30:.2f} GiB" if self.data_bytes >= 2**30 else f"{self.data_bytes / MiB:.2f} MiB"
        extra = "".join(f", {k} {v}" for k, v in self.notes.items())
        return f"data {size}, {self.chunks} chunks{extra}"


# --- task functions (importable by workers, the scheduler and the materializer)

def block_sum(b):
    """Consume a block and keep one number: the memory profile of storing
    to /dev/null, with a checksum to verify."""
    return np.array(b.sum(), ndmin=b.ndim)


def identity(b):
    return b


def job(i: int, max_sleep: float) -> int:
    """jobqueue's task: allocate up to 16 MiB, sleep, return i. Seeded by i
    so every scheduler sees the same durations."""
    rng = random.Random(i)
    stuff = "x" * rng.randint(1, 2**24)
    time.sleep(rng.uniform(0, max_sleep))
    del stuff
    return i


def checksum(arr) -> float:
    """A dask array reduced through block_sum: every block is consumed and
    dropped, only one float per block is kept."""
    return arr.map_blocks(block_sum, chunks=(1,) * arr.ndim, dtype=float).sum()


def nchunks(arr) -> int:
    return math.prod(len(c) for c in arr.chunks)


def rng(seed: int):
    import dask.array as da

    return da.random.default_rng(seed)


def close_to(expected: float, rel: float = 1e-9):
    def check(value: float) -> str | None:
        if not math.isclose(value, expected, rel_tol=rel, abs_tol=1e-9):
            return f"checksum {value!r} != expected {expected!r}"
        return None
    return check


def compute_float(collection) -> Callable:
    def run(client, timeout: float) -> float:
        return float(np.nansum(np.asarray(client.compute(collection).result(timeout))))
    return run


def warm_up() -> int:
    """Run once on every worker of a fresh cluster (client.run), so that the
    first timed run does not pay for importing the libraries."""
    import dask.array  # noqa: F401
    import dask.dataframe  # noqa: F401
    import pandas  # noqa: F401
    import xarray  # noqa: F401

    return 0


def worker_counters(dask_worker) -> dict:
    """Cumulative counters of one worker, read with client.run:
    transfer_outgoing_bytes_total (Worker.get_data adds the nbytes of every
    key it sends to a peer or to the scheduler's gather) and the spill
    buffer's ("disk-write", "bytes") metric (SpillBuffer.cumulative_metrics:
    pickled bytes written to disk)."""
    data = dask_worker.data
    metrics = getattr(data, "cumulative_metrics", {})
    return {
        "transferred": int(dask_worker.transfer_outgoing_bytes_total),
        "spilled": int(metrics.get(("disk-write", "bytes"), 0)),
    }


# --- workloads

def anom_mean(ctx: Context) -> Prepared:
    """xarray anomaly mean (original: memory // 2 of random data, rows of 10 MiB
    chunks; ours: 2 MiB rows)."""
    import xarray as xr

    if ctx.smoke:
        shape, chunks = (40, 100), (1, 100)
    else:
        cols = 2 * MiB // 8
        shape, chunks = (max(200, int(ctx.memory * 0.5 * ctx.scale) // (2 * MiB)), cols), (1, cols)
    data = rng(1).random(shape, chunks=chunks)
    ngroups = max(2, shape[0] // 100)
    arr = xr.DataArray(data, dims=["time", "x"], coords={"day": ("time", np.arange(shape[0]) % ngroups)})
    clim = arr.groupby("day").mean(dim="time")
    anom = arr.groupby("day") - clim
    result = anom.mean(dim="time")

    def run(client, timeout: float) -> float:
        return float(np.abs(client.compute(result.data).result(timeout)).max())

    def check(value: float) -> str | None:  # the mean of anomalies is 0
        return None if value < 1e-9 else f"max |anomaly mean| = {value!r}, expected ~0"
    return Prepared(data.nbytes, nchunks(data), run, check, {"groups": ngroups})


def anom_persist(ctx: Context) -> Prepared:
    """The anomaly as a new user runs it (co-assignment's memory cost on it
    was first seen this way): xarray with use_flox=False, a (2000, 125000)
    float64 array in (1, 125000) chunks (1.9 GiB, 2,000 chunks of 0.95 MiB)
    at --scale 1, rows times the scale otherwise, one group per 100 rows
    (20), the anomaly's mean persisted and then checked. anom-mean differs:
    2 MiB rows sized from the workers' memory, a group per 100 rows, and
    its result gathered by compute."""
    import xarray as xr

    if ctx.smoke:
        shape, chunks = (40, 100), (1, 100)
    else:
        cols = 125_000
        shape, chunks = (max(200, round(2000 * ctx.scale)), cols), (1, cols)
    ngroups = max(2, shape[0] // 100)
    with xr.set_options(use_flox=False):
        data = rng(1).random(shape, chunks=chunks)
        arr = xr.DataArray(data, dims=["time", "x"], coords={"day": ("time", np.arange(shape[0]) % ngroups)})
        clim = arr.groupby("day").mean(dim="time")
        result = (arr.groupby("day") - clim).mean(dim="time")

    def run(client, timeout: float) -> float:
        import dask.array as da
        from distributed import wait

        persisted = client.persist(result.data)
        wait(persisted, timeout=timeout)
        value = float(client.compute(da.abs(persisted).max()).result(timeout))
        del persisted
        return value

    def check(value: float) -> str | None:  # the mean of anomalies is 0
        return None if value < 1e-9 else f"max |anomaly mean| = {value!r}, expected ~0"
    return Prepared(data.nbytes, nchunks(data), run, check, {"groups": ngroups, "persisted": "yes"})


def basic_sum(ctx: Context) -> Prepared:
    """da.ones(...).sum(axis=1) over thin column chunks (original:
    da.zeros, 5 x memory); ones instead of zeros so the answer is checkable."""
    import dask.array as da

    if ctx.smoke:
        rows, cols = 100, 40
    else:
        rows = 10 * MiB // 8  # 2048 chunks for 4 GiB of workers: 10240 took 258 s here
        cols = int(ctx.memory * 5 * ctx.scale) // (rows * 8)
    data = da.ones((rows, cols), chunks=(rows, 1))
    result = data.sum(axis=1)
    return Prepared(data.nbytes, nchunks(data), compute_float(result), close_to(float(rows * cols)))


def climactic_mean(ctx: Context) -> Prepared:
    """xarray groupby-month mean over a 6-d ensemble (original: 2 x memory,
    chunks (1, 1, 96, 21, 90, 144); ours a quarter of that in each of three
    dims so that chunks fit 1 GiB workers)."""
    import pandas as pd
    import xarray as xr

    if ctx.smoke:
        chunks, fixed = (1, 1, 4, 3, 5, 6), (2, 4, 3, 5, 6)
        n_init = 6
    else:
        chunks, fixed = (1, 1, 24, 21, 45, 72), (28, 24, 21, 45, 72)  # 13 MB chunks, not 209 MB
        n_init = max(2, int(ctx.memory * 2 * ctx.scale) // (math.prod(fixed) * 8))
    shape = (fixed[0], n_init, *fixed[1:])
    data = rng(2).random(shape, chunks=chunks)
    array = xr.DataArray(
        data, dims=["ensemble", "init_date", "lat", "lon", "lead_time", "time"],
        coords={"init_date": pd.date_range(start="1960-01-01", periods=n_init, freq="MS")},
    )
    result = array.groupby("init_date.month").mean(["ensemble", "init_date"])
    mean_run = compute_float(result.data)
    count = result.size

    def check(value: float) -> str | None:  # uniform(0, 1) means
        mean = value / count
        return None if abs(mean - 0.5) < 0.05 else f"mean of monthly means {mean!r}, expected ~0.5"
    return Prepared(data.nbytes, nchunks(data), mean_run, check, {"months": min(12, n_init)})


def vorticity(ctx: Context) -> Prepared:
    """dx * pad_rechunk(u) - dy * pad_rechunk(v) (original: 0.85 x memory per
    array, chunks (5000, 5000, 1); ours (1000, 1000, 1)), consumed by block_sum."""
    import dask.array as da

    side = 20 if ctx.smoke else 1000
    depth = 4 if ctx.smoke else max(2, int(ctx.memory * 0.85 * ctx.scale) // (side * side * 8))
    shape, chunks = (side, side, depth), (side, side, 1)
    r = rng(3)
    u = r.random(shape, chunks=chunks)
    v = r.random(shape, chunks=chunks)
    dx = r.random((side + 1, side), chunks=(side + 1, side))
    dy = r.random((side + 1, side), chunks=(side + 1, side))

    def pad_rechunk(arr):
        padded = da.pad(arr, pad_width=[(0, 1), (0, 0), (0, 0)], mode="wrap")
        new_chunks = list(padded.chunks)
        new_chunks[0] = side + 1
        return da.rechunk(padded, chunks=new_chunks)

    result = dx[..., None] * pad_rechunk(u) - dy[..., None] * pad_rechunk(v)
    return Prepared(u.nbytes + v.nbytes, nchunks(u) + nchunks(v), compute_float(checksum(result)))


def double_diff(ctx: Context) -> Prepared:
    """a[1:, 1:] - b[:-1, :-1] of two random arrays (original: memory each,
    20 MiB chunks; ours 4 MiB), consumed by block_sum."""
    if ctx.smoke:
        side, chunks = 100, 50
    else:
        side, chunks = int(math.sqrt(ctx.memory * ctx.scale / 8)), "4MiB"
    r = rng(4)
    a = r.random((side, side), chunks=chunks)
    b = r.random((side, side), chunks=chunks)
    diff = a[1:, 1:] - b[:-1, :-1]
    return Prepared(a.nbytes + b.nbytes, nchunks(a) + nchunks(b), compute_float(checksum(diff)))


def dot_product(ctx: Context) -> Prepared:
    """(a @ a.T).sum() (original: memory // 17 in 128 MiB chunks; ours
    memory / 4 in 16 MiB chunks: at memory // 17 one run took 2 s here, far
    below the 20 s the suite aims for, and the matmul's cost grows as side³)."""
    if ctx.smoke:
        side, chunks = 100, 50
    else:
        side, chunks = int(math.sqrt(ctx.memory * ctx.scale / 4 / 8)), "16MiB"
    a = rng(5).random((side, side), chunks=chunks)
    result = (a @ a.T).sum()
    return Prepared(a.nbytes, nchunks(a), compute_float(result))


def map_overlap(ctx: Context) -> Prepared:
    """x.map_overlap(identity, depth=1) over many small chunks (original:
    10000 x 10000 in 50 x 50 chunks; ours memory-sized, 1 MiB chunks), consumed
    by block_sum; identity keeps the checksum equal to x's."""
    if ctx.smoke:
        side, chunks = 60, 20
    else:
        side, chunks = int(math.sqrt(ctx.memory * ctx.scale / 8)), 362
    x = rng(6).random((side, side), chunks=chunks)
    y = x.map_overlap(identity, depth=1, boundary="none")
    return Prepared(x.nbytes, nchunks(x), compute_float(checksum(y)))


def _timeseries(nbytes: int, ncols: int, freq_s: float, partition_freq: str, seed: int, extra=None):
    """dask.datasets.timeseries of about nbytes of float columns."""
    import dask
    import pandas as pd

    rows = max(10, int(nbytes // (8 * (ncols + 1))))
    start = pd.Timestamp("2020-01-01")
    end = start + pd.Timedelta(seconds=rows * freq_s)
    dtypes = {**(extra or {}), **{f"x{i}": float for i in range(ncols)}}
    return dask.datasets.timeseries(start=start, end=end, freq=f"{int(freq_s * 1000)}ms",
                                    partition_freq=partition_freq, dtypes=dtypes, seed=seed)


def _align_frames(ctx: Context):
    """dataframe-align's two frames and their size in bytes."""
    if ctx.smoke:
        df = _timeseries(50_000, 4, 60, "12h", 1)
        df2 = _timeseries(25_000, 4, 60, "5h", 2)
    else:
        df = _timeseries(ctx.memory * 0.5 * ctx.scale, 100, 0.6, "12h", 1)
        df2 = _timeseries(ctx.memory * 0.25 * ctx.scale, 100, 0.6, "1h", 2)
    nbytes = int(df.memory_usage(deep=False).sum().compute() + df2.memory_usage(deep=False).sum().compute()) \
        if ctx.smoke else int(ctx.memory * 0.75 * ctx.scale)
    return df, df2, nbytes


def dataframe_align(ctx: Context) -> Prepared:
    """(df2 - df).mean() of two random dataframes with different partitions
    (original: memory // 2 in 12 h partitions and memory // 4 in 1 h ones)."""
    df, df2, nbytes = _align_frames(ctx)
    result = (df2 - df).mean()
    return Prepared(nbytes, df.npartitions + df2.npartitions, compute_float(result))


def shuffled_partition_stats(part):
    """One row per partition: its distinct ids and the sum of its floats.
    After a shuffle on "id" every id lives in one partition, so the ids sum
    to the frame's distinct ids. An opaque function, so that the optimizer
    cannot drop the shuffle (it does for a plain sum, which ignores row
    order: the first version of this workload moved no data at all)."""
    import pandas as pd

    floats = part.drop(columns="id").to_numpy(dtype=float)
    return pd.DataFrame({"ids": [part["id"].nunique()], "sum": [float(np.nansum(floats))]})


def _shuffle(ctx: Context, method: str) -> Prepared:
    """A shuffle of a random dataframe on its integer "id" column with the
    given dataframe.shuffle.method; per output partition its distinct ids
    and float sum, summed."""
    import dask
    import pandas as pd

    if ctx.smoke:
        df = _timeseries(100_000, 2, 10, "1h", 7, {"id": int})
        nbytes = 100_000
    else:
        nbytes = int(ctx.memory * 0.5 * ctx.scale)
        df = _timeseries(nbytes, 10, 0.2, "6h", 7, {"id": int})
    meta = pd.DataFrame({"ids": pd.Series([], dtype="int64"), "sum": pd.Series([], dtype=float)})
    with dask.config.set({"dataframe.shuffle.method": method}):
        result = df.shuffle("id").map_partitions(shuffled_partition_stats, meta=meta).sum()
        collection = result.optimize()  # lower the shuffle while the method is set
    notes = p2p_notes(collection) if method == "p2p" else {}

    def run(client, timeout: float) -> float:
        with dask.config.set({"dataframe.shuffle.method": method}):
            out = client.compute(collection).result(timeout)
        return float(out["ids"]) + float(out["sum"])

    def check_against_plain(value: float) -> str | None:  # a shuffle only moves rows
        whole = df.compute(scheduler="sync")  # smoke size: pandas checks it
        expected = whole["id"].nunique() + float(np.nansum(whole.drop(columns="id").to_numpy(dtype=float)))
        return close_to(float(expected), rel=1e-9)(value)
    check = check_against_plain if ctx.smoke else (lambda value: None)
    return Prepared(nbytes, df.npartitions, run, check, notes)


def shuffle(ctx: Context) -> Prepared:
    """Task-based shuffle (dataframe.shuffle.method = tasks)."""
    return _shuffle(ctx, "tasks")


def shuffle_p2p(ctx: Context) -> Prepared:
    """The same shuffle through P2P (dask's default whenever a Client
    exists): the workers exchange shards among themselves and the scheduler
    only runs the shuffle's bookkeeping (runs, barrier, output pinning)."""
    return _shuffle(ctx, "p2p")


BARRIER_PREFIX = "shuffle-barrier-"


def p2p_notes(collection) -> dict:
    """The number of P2P shuffles in the graph; none is an error, so that a
    P2P variant can never silently measure a graph without P2P."""
    barriers = [k for k in collection.__dask_graph__() if isinstance(k, str) and k.startswith(BARRIER_PREFIX)]
    if not barriers:
        raise RuntimeError("the P2P variant's graph holds no P2P shuffle barrier")
    return {"p2p shuffles": len(barriers)}


def aligned_diff_stats(part):
    """Sum and count of the non-NaN differences of the "_2" and "_1"
    columns of one joined partition (the mean of (df2 - df) over all
    columns is their totals' ratio)."""
    import pandas as pd

    left = part[[c for c in part.columns if c.endswith("_2")]].to_numpy(dtype=float)
    right = part[[c for c in part.columns if c.endswith("_1")]].to_numpy(dtype=float)
    diff = left - right
    return pd.DataFrame({"sum": [float(np.nansum(diff))], "count": [int(np.count_nonzero(~np.isnan(diff)))]})


def dataframe_align_p2p(ctx: Context) -> Prepared:
    """dataframe-align's frames aligned on their index by a P2P hash join.
    The timeseries have known divisions, so (df2 - df) aligns by
    repartitioning and never shuffles under any method; with the divisions
    cleared, an outer join on the index must shuffle both sides (two P2P
    shuffles sharing their output tasks). The checksum is the mean of all
    differences."""
    import dask
    import pandas as pd

    df, df2, nbytes = _align_frames(ctx)
    floats = [c for c in df.columns if c.startswith("x")]
    meta = pd.DataFrame({"sum": pd.Series([], dtype=float), "count": pd.Series([], dtype="int64")})
    with dask.config.set({"dataframe.shuffle.method": "p2p"}):
        joined = df2[floats].clear_divisions().merge(
            df[floats].clear_divisions(), left_index=True, right_index=True, how="outer", suffixes=("_2", "_1"))
        collection = joined.map_partitions(aligned_diff_stats, meta=meta).sum().optimize()
    notes = p2p_notes(collection)

    def run(client, timeout: float) -> float:
        with dask.config.set({"dataframe.shuffle.method": "p2p"}):
            out = client.compute(collection).result(timeout)
        return float(out["sum"]) / max(1, int(out["count"]))

    def check_against_pandas(value: float) -> str | None:
        diff = df2[floats].compute(scheduler="sync") - df[floats].compute(scheduler="sync")
        return close_to(float(np.nanmean(diff.to_numpy(dtype=float))), rel=1e-9)(value)
    check = check_against_pandas if ctx.smoke else (lambda value: None)
    return Prepared(nbytes, df.npartitions + df2.npartitions, run, check, notes)


def jobqueue(ctx: Context) -> Prepared:
    """Many independent tasks that allocate memory and sleep, then one sum
    (original: 120 s budget, sleeps of 0-3 s, n = 120 / 3 x threads; ours
    a budget of 80 s x scale, so that a run at --scale 0.5 lasts about 20 s)."""
    from dask import delayed

    max_sleep = 0.05 if ctx.smoke else 3.0
    budget = 1.0 if ctx.smoke else 80.0 * ctx.scale
    n = max(4, round(budget / max_sleep * ctx.nthreads)) if not ctx.smoke else 8
    tasks = [delayed(job, pure=True)(i, max_sleep) for i in range(n)]
    total = delayed(sum)(tasks)

    def run(client, timeout: float) -> float:
        return float(client.compute(total).result(timeout))
    return Prepared(0, n, run, close_to(float(n * (n - 1) // 2)), {"tasks": n})


WORKLOADS: dict[str, Callable[[Context], Prepared]] = {
    "anom-mean": anom_mean,
    "anom-persist": anom_persist,
    "basic-sum": basic_sum,
    "climactic-mean": climactic_mean,
    "dataframe-align": dataframe_align,
    "jobqueue": jobqueue,
    "shuffle": shuffle,
    "dataframe-align-p2p": dataframe_align_p2p,
    "shuffle-p2p": shuffle_p2p,
    "vorticity": vorticity,
    "map-overlap": map_overlap,
    "double-diff": double_diff,
    "dot-product": dot_product,
}
