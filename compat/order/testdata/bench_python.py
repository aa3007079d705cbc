"""Time dask.order.order on the graphs bench_test.go orders, for comparison.

    PYTHONHASHSEED=0 python bench_python.py [--repeat N]

Same keys, same dsk order and dependency order as reductionTree and
independentTasks in bench_test.go. Prints seconds per call and ns/task.
"""

import argparse
import gc
import time

from dask._task_spec import Task, TaskRef
from dask.order import order


def _f(*args):
    return None


def reduction_tree(levels):
    dsk = {}
    prev = []
    for i in range(1 << (levels - 1)):
        k = ("x", i)
        dsk[k] = Task(k, _f)
        prev.append(k)
    level = 0
    while len(prev) > 1:
        level += 1
        nxt = []
        for i in range(len(prev) // 2):
            k = ("sum", level, i)
            dsk[k] = Task(k, _f, TaskRef(prev[2 * i]), TaskRef(prev[2 * i + 1]))
            nxt.append(k)
        prev = nxt
    return dsk


def independent(n):
    return {("inc", i): Task(("inc", i), _f) for i in range(n)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    for name, build in [("reduction-tree-64k", lambda: reduction_tree(16)),
                        ("independent-200k", lambda: independent(200_000)),
                        ("reduction-tree-1M", lambda: reduction_tree(20))]:
        dsk = build()
        best = None
        for _ in range(args.repeat):
            gc.collect()
            t0 = time.perf_counter()
            order(dsk)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        print(f"{name}: {len(dsk)} tasks, dask.order.order {best:.3f} s, {best / len(dsk) * 1e9:.0f} ns/task", flush=True)


if __name__ == "__main__":
    main()
