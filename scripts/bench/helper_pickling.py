"""What the materializer helper spends on a small graph, stage by stage, in
one process (no scheduler, no workers): the latency benchmark's two array
cases (latency_client.py) as a Client would send them.

    .venv/bin/python scripts/bench/helper_pickling.py [--calls 200]

Per case and stage, the median over --calls calls of: unpickling the
expression, `__dask_graph__` (dask's optimization and materialization, which
Python's scheduler runs too), converting the tasks (compat/materializer.py
`converted`), and pickling every task's spec two ways: through the helper's
object table, one per graph, as `materialize` pickles the specs of a graph
that is not sent whole (`GraphSpecs`: callables as gets of a pre-populated
memo, bulky values by persistent id), and distributed's `dumps` per spec
(what Python's scheduler does when it sends a task). The two ways alternate, twice each, so a drift of
the machine shows as a difference between the pairs. Then the helper's whole
`materialize` per case, with every spec through the object table and with
small graphs' specs pickled whole (materializer.PLAIN_BELOW_TASKS), alternating
call by call.
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
import spec_pickling  # noqa: E402
from helper_map_stages import materialize_request  # noqa: E402

CASES = {
    "array-sum-4": lambda: da.arange(4000, chunks=1000).sum(),
    "slice-mean": lambda: da.ones((600, 600), chunks=(100, 100))[50:550:2, 50:550].mean(),
    # sizes between, for where pickling specs whole stops paying
    "array-sum-12": lambda: da.arange(12000, chunks=1000).sum(),
    "array-sum-24": lambda: da.arange(24000, chunks=1000).sum(),
}
# the latency benchmark's two, stage by stage
STAGE_CASES = ("array-sum-4", "slice-mean")


def one_call(blob: bytes, mode: str) -> tuple[float, float, float, float, int]:
    t0 = time.perf_counter()
    expr = pickle.loads(blob)
    t1 = time.perf_counter()
    dsk = expr.__dask_graph__()
    t2 = time.perf_counter()
    nodes = list(materializer.converted(dsk))
    t3 = time.perf_counter()
    if mode == "object table":
        specs = spec_pickling.GraphSpecs(spec_pickling.ObjectTable(), plain=False)
        for _, node in nodes:
            specs.spec(node)
    else:
        for _, node in nodes:
            dumps(node)
    t4 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, t4 - t3, len(nodes)


def one_materialize(blob: bytes, plain_below: int) -> float:
    """The helper's whole materialize of the pickled expression (what Go
    waits for, the pipe apart), with the small-graph threshold set to
    plain_below. The request is made afresh from blob for each call, as a
    Client sends each graph anew."""
    materializer.PLAIN_BELOW_TASKS = plain_below
    req = materialize_request(pickle.loads(blob))
    t0 = time.perf_counter()
    for _ in materializer.materialize(req):
        pass
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    print("case | pickling | tasks | unpickle µs | __dask_graph__ µs | convert µs | pickle specs µs")
    for case in STAGE_CASES:
        make = CASES[case]
        blob = pickle.dumps(collections_to_expr([make()], True))
        for mode in ("object table", "dumps per spec", "object table", "dumps per spec"):
            runs = [one_call(blob, mode) for _ in range(args.calls)]
            med = [statistics.median(r[i] for r in runs) * 1e6 for i in range(4)]
            print(f"{case} | {mode} | {runs[0][4]} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.0f} | {med[3]:.0f}")
    # materialize as the helper runs it, every spec through the object
    # table (PLAIN_BELOW_TASKS 0) against every spec pickled whole, the two
    # alternating call by call: where whole stops paying is where the
    # shipped threshold belongs
    shipped = materializer.PLAIN_BELOW_TASKS
    print()
    print(f"(shipped: specs whole below {shipped} tasks)")
    print("case | tasks | materialize, table µs | materialize, whole µs | ratio of medians")
    for case, make in CASES.items():
        expr = collections_to_expr([make()], True)
        blob = pickle.dumps(expr)
        tasks = len(expr.__dask_graph__())
        table, whole = [], []
        for _ in range(args.calls):
            table.append(one_materialize(blob, 0))
            whole.append(one_materialize(blob, 1 << 30))
        t, w = statistics.median(table) * 1e6, statistics.median(whole) * 1e6
        print(f"{case} | {tasks} | {t:.0f} | {w:.0f} | {w / t:.2f}")
    materializer.PLAIN_BELOW_TASKS = shipped


if __name__ == "__main__":
    main()
