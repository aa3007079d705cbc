"""What the materializer helper spends per task on a `client.map`, stage by
stage, in one process (no scheduler, no workers): the graph-path benchmark's
map-20k (`client.map(inc, range(20_000))`) as a stock Client sends it.

    .venv/bin/python scripts/bench/helper_map_stages.py [--tasks 20000] [--calls 9] [--memo | --gc]

Per stage, the median over --calls calls of its µs per task:

- deserialize: the expression's frames to the `_MapExpr` (distributed's);
- `__dask_graph__`: `_MapExpr._layer`, one `Task` per element (distributed's
  and dask's: Python's scheduler runs it in `update_graph`);
- convert: compat/materializer.py `converted` (convert_legacy_task per node);
- pickle specs: `GraphSpecs.spec` per task, as materialize pickles them
  (ours around pickle's: `MemoSpecPickler`, the table's callables as gets of
  a pre-populated memo), then the same tasks with `SpecPickler` (the
  table's callables as persistent ids, what the helper used before), with a
  plain `pickle.Pickler` reused the same way (no table), with `pickle.dumps`
  per task (what Python's scheduler pays when it sends a task), and
  `Task.__reduce_ex__` alone (dask's part of any pickling);
- rows: the answer's per-task row (key, dependencies, kind, data_producer,
  annotations, spec, priority), as `materialize` builds it;
- pack: `helper_wire.graph_chunk`, the rows to msgpack frames.

And the whole `materialize` on the same request, for the total.

With --memo, instead: the whole `materialize` with the table's callables as
memo gets (as shipped) and as persistent ids, alternating call by call.

With --gc, instead: the whole `materialize` with Python's cyclic collector
on and off (as the helper now runs it, compat/materializer.py `handle`),
alternating call by call, in CPU µs per task, and the collections a call
with the collector on made, by generation, with the time they took.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import statistics
import sys
import time
import types
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat"))

from distributed.client import _MapExpr  # noqa: E402
from distributed.protocol.serialize import serialize  # noqa: E402

import helper_wire as wire  # noqa: E402
import materializer  # noqa: E402
import spec_pickling  # noqa: E402


def materialize_request(expr, keys=None):
    """A MaterializeRequest for expr, serialized as a stock Client sends it
    (materialize does not consume it: this script's calls share one)."""
    header, frames = serialize(expr, serializers=("pickle",), on_error="raise")
    msg = {"expr_ser": SimpleNamespace(header=header, frames=frames)}
    if keys is not None:
        msg["keys"] = keys
    return wire.MaterializeRequest(id=1, msg=msg, ordering="go", check_order=False)


def request(n: int):
    # a module the helper can import, as the benchmark's inc is
    mod = types.ModuleType("map_stages_mod")
    exec("def inc(x):\n    return x + 1\n", mod.__dict__)
    sys.modules[mod.__name__] = mod
    expr = _MapExpr(mod.inc, [list(range(n))], key="inc", pure=True, annotations={}, kwargs={})
    keys = list(expr.keys)  # the client computes them before it sends (Client.map)
    return materialize_request(expr, keys)


def stages(req, n: int) -> dict[str, float]:
    t = {}
    c = time.perf_counter
    t0 = c()
    expr = materializer.deserialize_expr(req.msg["expr_ser"])
    t["deserialize"] = c() - t0
    t0 = c()
    dsk = expr.__dask_graph__()
    t["__dask_graph__"] = c() - t0
    t0 = c()
    nodes = list(materializer.converted(dsk))
    t["convert"] = c() - t0
    t0 = c()
    graph_specs = spec_pickling.GraphSpecs(spec_pickling.ObjectTable(), plain=False)
    specs = [graph_specs.spec(node) for _, node in nodes]
    t["pickle specs (GraphSpecs: MemoSpecPickler)"] = c() - t0
    t0 = c()
    pickler = spec_pickling.SpecPickler(spec_pickling.ObjectTable())
    for _, node in nodes:
        pickler.spec(node)
    t["  SpecPickler (persistent ids)"] = c() - t0
    t0 = c()
    plain = spec_pickling.ReusedPickler()
    for _, node in nodes:
        plain.clear_memo()
        plain.pickled(node)
    t["  a plain Pickler, no table"] = c() - t0
    t0 = c()
    for _, node in nodes:
        pickle.dumps(node, protocol=5)
    t["  pickle.dumps per task"] = c() - t0
    t0 = c()
    for _, node in nodes:
        node.__reduce_ex__(5)
    t["  Task.__reduce_ex__ alone"] = c() - t0
    t0 = c()
    rows = [
        [
            materializer.plain_key(k),
            [materializer.plain_key(d) for d in node.dependencies] if node.dependencies else [],
            type(node).__name__,
            bool(node.data_producer),
            None,  # materialize skips task_annotations when the graph has none
            spec,
            None,
            memo_base,
        ]
        for (k, node), (spec, memo_base) in zip(nodes, specs)
    ]
    t["rows"] = c() - t0
    t0 = c()
    chunk = materializer.CHUNK
    for i in range(0, len(rows), chunk):
        wire.graph_chunk(1, [], rows[i : i + chunk], len(rows), {} if i + chunk >= len(rows) else None)
    t["pack"] = c() - t0
    t0 = c()
    for _ in materializer.materialize(req):
        pass
    t["materialize, whole"] = c() - t0
    return {k: v / n * 1e6 for k, v in t.items()}


def with_and_without_gc(req, n: int, calls: int) -> None:
    """materialize with the collector on and off, alternating."""
    events: list[tuple[str, int, float]] = []

    def record(phase, info):
        events.append((phase, info["generation"], time.perf_counter()))

    gc.collect()
    gc.freeze()  # the imports are the process's own, as in the helper's main
    gc.callbacks.append(record)
    res: dict[str, list[float]] = {"on": [], "off": []}
    passes = spent = None
    for mode in alternating(calls, "on", "off"):
        if mode == "off":
            gc.disable()
        events.clear()
        res[mode].append(materialize_cpu(req, n))
        gc.enable()
        if mode == "on":
            starts = [g for phase, g, _ in events if phase == "start"]
            passes = {g: starts.count(g) for g in sorted(set(starts))}
            spent = sum(b[2] - a[2] for a, b in zip(events[::2], events[1::2])) * 1e3
    gc.callbacks.remove(record)
    print_medians(f"collector | CPU µs per task, median of {calls} (range)", res)
    print(f"a call with the collector on: passes by generation {passes}, {spent:.1f} ms in them")


def alternating(calls: int, a: str, b: str):
    """The modes of 2 * calls calls, a and b alternating, the pair's order
    turning each pair."""
    for i in range(calls * 2):
        order = (a, b) if (i // 2) % 2 == 0 else (b, a)
        yield order[i % 2]


def materialize_cpu(req, n: int) -> float:
    """One whole materialize of req, in CPU µs per task."""
    t0 = time.process_time()
    for _ in materializer.materialize(req):
        pass
    return (time.process_time() - t0) / n * 1e6


def print_medians(title: str, res: dict[str, list[float]]) -> None:
    print(title)
    for mode, vals in res.items():
        print(f"{mode} | {statistics.median(vals):.2f} ({min(vals):.2f}–{max(vals):.2f})")


def memo_against_persistent_ids(req, n: int, calls: int) -> None:
    """The whole materialize with the table's callables as memo gets (as
    shipped) and as persistent ids (spec_pickling.MEMO_TABLE_MAX 0, what the
    helper did before), alternating call by call, the pair's order turning,
    with the collector off as the helper runs it."""
    shipped = spec_pickling.MEMO_TABLE_MAX
    res: dict[str, list[float]] = {"memo gets": [], "persistent ids": []}
    gc.collect()
    gc.freeze()
    for mode in alternating(calls, "memo gets", "persistent ids"):
        spec_pickling.MEMO_TABLE_MAX = shipped if mode == "memo gets" else 0
        gc.disable()
        res[mode].append(materialize_cpu(req, n))
        gc.enable()
        gc.collect()
    spec_pickling.MEMO_TABLE_MAX = shipped
    print_medians(f"table references | materialize, CPU µs per task, median of {calls} (range)", res)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--calls", type=int, default=9)
    ap.add_argument("--gc", action="store_true", help="materialize with the collector on and off instead")
    ap.add_argument("--memo", action="store_true",
                    help="materialize with the table's callables as memo gets and as persistent ids instead")
    args = ap.parse_args()
    req = request(args.tasks)
    if args.gc:
        with_and_without_gc(req, args.tasks, args.calls)
        return
    if args.memo:
        memo_against_persistent_ids(req, args.tasks, args.calls)
        return
    runs = [stages(req, args.tasks) for _ in range(args.calls)]
    print(f"stage | µs per task, median of {args.calls} (range)")
    for name in runs[0]:
        vals = [r[name] for r in runs]
        print(f"{name} | {statistics.median(vals):.2f} ({min(vals):.2f}–{max(vals):.2f})")


if __name__ == "__main__":
    main()
