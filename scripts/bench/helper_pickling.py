"""What the materializer helper spends on a small graph, stage by stage, in
one process (no scheduler, no workers): the latency benchmark's two array
cases (latency_client.py) as a Client would send them.

    .venv/bin/python scripts/bench/helper_pickling.py [--calls 200]

Per case and stage, the median over --calls calls of: unpickling the
expression, `__dask_graph__` (dask's optimization and materialization, which
Python's scheduler runs too), converting the tasks (compat/materializer.py
`converted`), and pickling every task's spec two ways: the helper's
(`SpecPickler`, callables and bulky values by persistent id into one object
table per graph) and distributed's `dumps` per spec (what Python's scheduler
does when it sends a task). The two ways alternate, twice each, so a drift of
the machine shows as a difference between the pairs.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat"))

import dask.array as da  # noqa: E402
from dask.base import collections_to_expr  # noqa: E402
from distributed.protocol.pickle import dumps  # noqa: E402

import materializer  # noqa: E402

CASES = {
    "array-sum-4": lambda: da.arange(4000, chunks=1000).sum(),
    "slice-mean": lambda: da.ones((600, 600), chunks=(100, 100))[50:550:2, 50:550].mean(),
}


def one_call(blob: bytes, mode: str) -> tuple[float, float, float, float, int]:
    t0 = time.perf_counter()
    expr = pickle.loads(blob)
    t1 = time.perf_counter()
    dsk = expr.__dask_graph__()
    t2 = time.perf_counter()
    nodes = list(materializer.converted(dsk))
    t3 = time.perf_counter()
    if mode == "object table":
        pickler = materializer.SpecPickler(materializer.ObjectTable())
        for _, node in nodes:
            pickler.spec(node)
    else:
        for _, node in nodes:
            dumps(node)
    t4 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, t4 - t3, len(nodes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    print("case | pickling | tasks | unpickle µs | __dask_graph__ µs | convert µs | pickle specs µs")
    for case, make in CASES.items():
        blob = pickle.dumps(collections_to_expr([make()], True))
        for mode in ("object table", "dumps per spec", "object table", "dumps per spec"):
            runs = [one_call(blob, mode) for _ in range(args.calls)]
            med = [statistics.median(r[i] for r in runs) * 1e6 for i in range(4)]
            print(f"{case} | {mode} | {runs[0][4]} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.0f} | {med[3]:.0f}")


if __name__ == "__main__":
    main()
