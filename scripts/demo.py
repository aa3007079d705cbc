"""The demo behind scripts/demo.sh: a stock Client and two stock workers
computing through the Go scheduler, checked against dask's sync scheduler."""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402
from distributed import Client  # noqa: E402

from cluster import GoScheduler, Workers  # noqa: E402


def timed(label, fn):
    start = time.perf_counter()
    value = fn()
    print(f"  {label}: {time.perf_counter() - start:.2f} s")
    return value


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="dask-go-demo-") as tmp:
        sched = GoScheduler(Path(tmp)).start()
        workers = Workers(Path(tmp))
        try:
            print(f"dask-go-scheduler listening on {sched.address}")
            workers.start(sched.address, "demo-w1", nthreads=2)
            workers.start(sched.address, "demo-w2", nthreads=2)
            with Client(sched.address, timeout=30) as client:
                client.wait_for_workers(2, timeout=60)
                print(f"workers: {sorted(client.nthreads().items())}")

                x = da.random.default_rng(42).random((4000, 4000), chunks=(500, 500))
                expr = (x + x.T).mean(axis=0).sum()
                print("dask.array: (x + x.T).mean(axis=0).sum() over 64 chunks of 2 MB")
                got = timed("go scheduler", expr.compute)
                want = timed("dask sync scheduler", lambda: expr.compute(scheduler="sync"))
                print(f"  result {got:.6f} (sync: {want:.6f})")
                assert np.isclose(got, want)

                times = pd.date_range("2000-01-01", periods=365 * 4, freq="D")
                temp = xr.DataArray(
                    da.random.default_rng(0).normal(15, 8, (len(times), 90, 90), chunks=(73, 90, 90)),
                    dims=("time", "lat", "lon"),
                    coords={"time": times},
                    name="temperature",
                )
                clim = temp.groupby("time.month").mean("time")
                anom = temp.groupby("time.month") - clim
                result = anom.std("time")
                print("xarray: monthly anomaly std over 4 years of 90x90 daily data")
                got = timed("go scheduler", lambda: result.compute())
                want = timed("dask sync scheduler", lambda: result.compute(scheduler="sync"))
                print(f"  mean anomaly std {float(got.mean()):.6f} (sync: {float(want.mean()):.6f})")
                np.testing.assert_allclose(got.values, want.values)
            print("demo OK")
            return 0
        finally:
            workers.stop()
            sched.stop()


if __name__ == "__main__":
    sys.exit(main())
