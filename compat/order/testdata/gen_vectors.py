"""Graphs with the priorities dask.order.order gives them, for the Go port.

    PYTHONHASHSEED=0 python gen_vectors.py [--only SUBSTRING] [--random N]

One JSON object per line and graph:

    {"name": str, "keys": [keycodec...], "num_nodes": N,
     "kinds": "TAD..." (Task, Alias, DataNode per graph node),
     "deps": [[dependency indices in construction order] per graph node],
     "expected": [priority per graph node],
     "internals": {what dask.order computed on the way, see Internals}}
     or "error": message, "error_type": "RuntimeError" (a cycle) or "KeyError"

Each graph's structure is taken from somewhere (a benchmark workload, a
test-suite shape, a hand-made corner case, a seeded random DAG), then REBUILT
from that structure alone, `Task(key, f, *[TaskRef(d) for d in deps])`,
`Alias(key, target)`, `DataNode(key, 1)`, in the written node and dependency
order, and the rebuilt graph is what dask.order.order sees: the Go side
builds the identical frozensets from the same lists.

Graphs materialized from collections (workload/..., most suite/...) are also
written as original/<name>: dask.order.order on the graph exactly as a
Client materializes it, with "deps" holding each node's construction program
(program_of: nested container arguments between -1 and -2, which
order.DepsOpen/DepsClose mirror), since Task.__init__ copies a nested
argument's frozenset instead of adding its keys one by one.

Keys past num_nodes are external (named as dependencies, not in the graph).
Must run under a fixed PYTHONHASHSEED (the Go tests use 0, and 3141592653
for the workloads).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import importlib.util
import json
import os
import random
import sys
import time
from pathlib import Path

from keycodec import encode_key

if not os.environ.get("PYTHONHASHSEED", "").isdigit():
    sys.exit("gen_vectors.py: run with PYTHONHASHSEED set to a number (the Go test uses 0 and one other seed)")

import dask  # noqa: E402
import dask.order  # noqa: E402
from dask._task_spec import Alias, DataNode, GraphNode, Task, TaskRef  # noqa: E402
from dask.order import order  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def _f(*args):
    return None


# ---- structure -> rebuilt graph -> expected priorities -----------------------

class Spec:
    """A graph's structure: keys in dsk order, kind and dependency list each."""

    def __init__(self, name):
        self.name = name
        self.nodes = []  # (key, kind, [dep keys])
        self.original = None  # the materialized dsk it was taken from, if any

    def add(self, key, kind="T", deps=()):
        self.nodes.append((key, kind, list(deps)))
        return key


def rebuild(spec):
    dsk = {}
    for key, kind, deps in spec.nodes:
        if kind == "D":
            node = DataNode(key, 1)
            if deps:  # a non-task leaf gathering keys: order's leaf pre-pass
                node._dependencies = Task(key, _f, *[TaskRef(d) for d in deps]).dependencies
        elif kind == "A":
            node = Alias(key, deps[0])
        else:
            node = Task(key, _f, *[TaskRef(d) for d in deps])
        dsk[key] = node
    return dsk


def record(spec, internals=True, dsk=None, programs=None):
    """One output line: the spec's structure and dask.order's answer for the
    graph rebuilt from it, or, given dsk and programs, for dsk itself with
    each node's dependency construction program (see program_of)."""
    keys = [k for k, _, _ in spec.nodes]
    index = {k: i for i, k in enumerate(keys)}
    if len(index) != len(keys):
        raise SystemExit(f"{spec.name}: duplicate keys")
    for _, _, deps in spec.nodes:
        for d in deps:
            if d not in index:
                index[d] = len(keys)
                keys.append(d)

    def encode(program):
        return [d.code if isinstance(d, _Marker) else index[d] for d in program]

    out = {
        "name": spec.name,
        "keys": [encode_key(k) for k in keys],
        "num_nodes": len(spec.nodes),
        "kinds": "".join(kind for _, kind, _ in spec.nodes),
        "deps": [encode(p) for p in programs] if programs else [encode(deps) for _, _, deps in spec.nodes],
    }
    seen = Internals(index) if internals else None
    try:
        with seen or contextlib.nullcontext():
            prio = order(dsk if dsk is not None else rebuild(spec))
        out["expected"] = [prio[k] for k, _, _ in spec.nodes]
    except (RuntimeError, KeyError) as e:  # KeyError: see cycle/through-removed-datanode
        out["error"] = str(e)
        out["error_type"] = type(e).__name__
    if seen and seen.data:
        out["internals"] = seen.data
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return len(spec.nodes)


class Internals:
    """Records what dask.order computes on the way, by wrapping the module
    functions it calls after its pre-pass: every key's dependencies and
    dependents in iteration order (after the pre-pass rebuilt them), and
    _connecting_to_roots' outputs (len of each root set, max_dependents,
    each leaf set in iteration order). Node ids index the written keys;
    keys the pre-pass removed are absent (null)."""

    def __init__(self, index):
        self.index = index
        self.data = {}

    def __enter__(self):
        self.saved = dask.order.ndependencies, dask.order._connecting_to_roots
        nd, ctr = self.saved
        ids = self.index
        calls = []

        def ndependencies(dependencies, dependents):
            n = len(ids)
            self.data["deps"] = deps = [None] * n
            self.data["dependents"] = dts = [None] * n
            for k in dependencies:
                deps[ids[k]] = [ids[d] for d in dependencies[k]]
                dts[ids[k]] = [ids[d] for d in dependents[k]]
            return nd(dependencies, dependents)

        def connecting_to_roots(dependencies, dependents):
            result, max_dependents = ctr(dependencies, dependents)
            n = len(ids)
            if not calls:
                self.data["roots_len"] = roots = [None] * n
                self.data["max_dependents"] = md = [None] * n
                for k, v in result.items():
                    roots[ids[k]] = len(v)
                for k, v in max_dependents.items():
                    md[ids[k]] = v
            else:
                self.data["leafs"] = leafs = [None] * n
                for k, v in result.items():
                    leafs[ids[k]] = [ids[x] for x in v]
            calls.append(1)
            return result, max_dependents

        dask.order.ndependencies = ndependencies
        dask.order._connecting_to_roots = connecting_to_roots
        return self

    def __exit__(self, *exc):
        dask.order.ndependencies, dask.order._connecting_to_roots = self.saved
        return False


class _Marker:
    def __init__(self, code):
        self.code = code


OPEN, CLOSE = _Marker(-1), _Marker(-2)  # written as order.DepsOpen, order.DepsClose


def program_of(node):
    """How Task.__init__ built node's dependencies: its TaskRef arguments in
    order, and for an argument that is a GraphNode with dependencies (which
    it copies with set()/update()) that node's own program between OPEN and
    CLOSE."""
    if isinstance(node, Alias):
        return [node.target]
    if isinstance(node, DataNode):
        return []
    if not isinstance(node, Task):
        raise TypeError(f"no construction program for {type(node).__name__}")
    out = []
    for a in itertools.chain(node.args, node.kwargs.values()):
        if isinstance(a, TaskRef):
            out.append(a.key)
        elif isinstance(a, GraphNode) and a.dependencies:
            out += [OPEN, *program_of(a), CLOSE]
    return out


def from_dsk(name, dsk):
    """The structure of a materialized graph: GraphNode kinds, and each node's
    dependencies in its frozenset's iteration order (any fixed order would
    do: the rebuilt graph is built from the list written out)."""
    spec = Spec(name)
    for key, node in dsk.items():
        if isinstance(node, DataNode):
            spec.add(key, "D", sorted(node.dependencies, key=str) if node.dependencies else ())
        elif isinstance(node, Alias):
            spec.add(key, "A", [node.target])
        else:
            spec.add(key, "T", list(node.dependencies))
    spec.original = dsk
    return spec


def materialize(coll):
    """As a Client does (scripts/export-graph.py's materialize)."""
    from dask._expr import FinalizeCompute
    from dask._task_spec import convert_legacy_graph
    from dask.base import collections_to_expr

    expr = FinalizeCompute(collections_to_expr([coll], True)).optimize()
    return convert_legacy_graph(expr.__dask_graph__())


# ---- the benchmark workloads, at small scale ----------------------------------

SCALES = {"map-overlap": (0.02, 0.05, 0.1), "double-diff": (0.02, 0.05, 0.1), "jobqueue": (0.5, 2, 5),
          "dot-product": (0.25, 0.5, 1.0)}


def workloads():
    spec = importlib.util.spec_from_file_location("export_graph", ROOT / "scripts" / "export-graph.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["export_graph"] = mod  # before exec: its dataclasses look themselves up there
    spec.loader.exec_module(mod)
    for name in mod.FULL:
        for scale in SCALES.get(name, (0.05, 0.25, 0.5)):
            w = mod.small(name, 4 * 2**30, 4, scale)
            yield from_dsk(f"workload/{name}@{scale}", materialize(w.collection))


# ---- shapes typical of the test suite ---------------------------------------

def suite():
    import dask.array as da
    import dask.dataframe as dd  # noqa: F401
    import numpy as np

    s = Spec("suite/client-map-500")
    for i in range(500):
        s.add(f"inc-{i:x}{i * 7919 % 1000:03d}")
    yield s

    s = Spec("suite/add-reduction-tree")
    level = [s.add(("x", i)) for i in range(256)]
    depth = 0
    while len(level) > 1:
        depth += 1
        level = [s.add(("add", depth, i), deps=level[2 * i:2 * i + 2]) for i in range((len(level) + 1) // 2)]
    yield s

    x = da.random.default_rng(0).random((60, 60), chunks=10)
    yield from_dsk("suite/array-sum", materialize(x.sum()))
    yield from_dsk("suite/array-mean-axis0", materialize(x.mean(axis=0)))
    yield from_dsk("suite/array-transpose-add-mean", materialize((x + x.T).mean()))
    yield from_dsk("suite/array-rechunk", materialize(x.rechunk((30, 4))))
    yield from_dsk("suite/array-map-overlap", materialize(x.map_overlap(lambda b: b, depth=1, boundary="none").sum()))
    y = da.ones((40, 40), chunks=5)
    yield from_dsk("suite/array-dot", materialize(y.dot(y.T).sum(split_every=3)))
    yield from_dsk("suite/array-cumsum", materialize(da.arange(100, chunks=7).cumsum(axis=0)))

    df = dask.datasets.timeseries(start="2000-01-01", end="2000-01-21", freq="1h", partition_freq="1D", seed=1)
    df2 = dask.datasets.timeseries(start="2000-01-01", end="2000-01-21", freq="2h", partition_freq="2D", seed=2)
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        yield from_dsk("suite/df-groupby-mean", materialize(df.groupby("name").x.mean()))
        yield from_dsk("suite/df-groupby-split-out",
                       materialize(df.groupby("name").x.sum(split_out=4)))
        yield from_dsk("suite/df-merge-tasks", materialize(df.merge(df2, on="id", shuffle_method="tasks")))
        yield from_dsk("suite/df-shuffle-tasks", materialize(df.shuffle("id", shuffle_method="tasks").x.sum()))
        yield from_dsk("suite/df-set-index", materialize(df.set_index("id").x.sum()))

    import xarray as xr

    data = da.random.default_rng(3).random((48, 20), chunks=(4, 20))
    arr = xr.DataArray(data, dims=["time", "x"], coords={"day": ("time", np.arange(48) % 6)})
    anom = (arr.groupby("day") - arr.groupby("day").mean(dim="time")).mean(dim="time")
    yield from_dsk("suite/xarray-anomaly", materialize(anom.data))


def hand_made():
    s = Spec("suite/single-task")
    s.add("only")
    yield s

    s = Spec("suite/single-datanode")
    s.add("only", "D")
    yield s

    s = Spec("suite/two-components")
    for c in "ab":
        roots = [s.add(f"{c}-root-{i}") for i in range(5)]
        mids = [s.add(f"{c}-mid-{i}", deps=[roots[i], roots[(i + 1) % 5]]) for i in range(5)]
        s.add(f"{c}-total", deps=mids)
    yield s

    s = Spec("suite/external-keys")
    for i in range(20):
        s.add(("use", i), deps=[("future", i % 7), ("future", (i * 3) % 7)] if i % 4 else [("future", i % 7)])
    s.add("agg", deps=[("use", i) for i in range(20)])
    yield s

    s = Spec("suite/external-only-deps")
    s.add("a", deps=["ext-1"])
    s.add("b", deps=["ext-1", "ext-2"])
    s.add("c", deps=["a", "b", "ext-3"])
    yield s

    s = Spec("suite/shared-datanode-roots")
    data = [s.add(f"data-{i}", "D") for i in range(4)]
    for i in range(12):
        s.add(f"work-{i}", deps=[data[i % 4], data[(i + 1) % 4], f"load-{i % 3}"] if i % 2 else [data[i % 4]])
    for i in range(3):
        s.add(f"load-{i}")
    s.add("result", deps=[f"work-{i}" for i in range(12)])
    yield s

    s = Spec("suite/datanode-chain-prepass")  # removing a root makes its dependents roots
    s.add("d0", "D")
    s.add("d1", "D", ["d0"])  # (a DataNode with a dependency, to chain the pre-pass)
    s.add("d2", "D", ["d0"])
    s.add("t1", deps=["d1", "d2"])
    s.add("t2", deps=["d1"])
    s.add("t3", deps=["d2", "t1"])
    s.add("t4", deps=["t2", "t3"])
    yield s

    s = Spec("suite/non-task-leaf-gather")  # the leaf branch of the pre-pass
    for i in range(6):
        s.add(("part", i))
        s.add(("inc", i), deps=[("part", i)])
    s.add("store", "D", [("inc", i) for i in range(6)])
    s.add("store2", "D", [("inc", 0), ("inc", 5)])
    yield s

    s = Spec("suite/aliases")
    for i in range(8):
        s.add(("x", i))
        s.add(("alias-x", i), "A", [("x", i)])
    s.add("sum", deps=[("alias-x", i) for i in range(8)])
    s.add("final", "A", ["sum"])
    yield s

    s = Spec("suite/mixed-key-types")
    ks = [0, -1, 2**40, 1.5, -2.75, "é", "日本", "\U0001F600", ("t", 1), ("t", (2, "x")), ("nested", ("a", 1.25)), 2**63]
    for i, k in enumerate(ks):
        s.add(k, deps=[ks[j] for j in range(i) if (i * 7 + j) % 3 == 0])
    yield s

    s = Spec("suite/str-ties")  # distinct keys with equal str(): only the iteration order breaks ties
    s.add(1)
    s.add("1")
    s.add(("a",))
    s.add("('a',)")
    s.add(2.5)
    s.add("2.5")
    s.add("sink", deps=[1, "1", ("a",), "('a',)", 2.5, "2.5"])
    s.add("sink2", deps=["2.5", 2.5, "('a',)"])
    yield s

    s = Spec("suite/diamond-lattice-bigint")  # total_dependencies passes 2**64
    prev = [s.add(("l", 0, j)) for j in range(2)]
    for i in range(1, 90):
        prev = [s.add(("l", i, j), deps=prev) for j in range(2)]
    s.add("top", deps=prev)
    yield s

    for v in range(4):  # removed DataNode roots rebuild every dependencies frozenset
        s = Spec(f"suite/relayout-after-removal-{v}")
        shared = [s.add(("shared", v, j), "D") for j in range(1 + v)]
        roots = [s.add(("r", v, j)) for j in range(24)]
        wide = []
        for i in range(10):
            ds = [roots[(i * 5 + j * 7) % 24] for j in range(5 + (i + v) % 8)]
            ds.insert(i % len(ds), shared[i % len(shared)])
            wide.append(s.add(("wide", v, i), deps=ds))
        s.add(("sink", v), deps=wide + roots[:3 + v])
        yield s

    for v in range(6):  # use_longest_path: a root that is also a leaf resets `size`
        s = Spec(f"suite/isolated-root-{v}")
        s.add(f"iso-{v}")
        for j in range(2 + v % 3):
            r = s.add(f"root-{v}-{j}")
            s.add(f"leaf-{v}-{j}", deps=[r])
        yield s

    s = Spec("suite/max-dependents-skip")  # children sharing one root set object
    ra, rb = s.add("ra"), s.add("rb")
    fan = [s.add(("fan", i), deps=[rb]) for i in range(4)]  # rb has 5 dependents
    x1 = s.add("x1", deps=[ra, rb])
    x2 = s.add("x2", deps=[rb, ra])  # the same union object as x1
    m = s.add("m", deps=[x1, x2])
    s.add("k1", deps=[m, fan[0]])
    s.add("k2", deps=[fan[1], m])
    s.add("k3", deps=[x2, x1, fan[2]])
    yield s

    for v, twin in enumerate([lambda i: (i, str(i)), lambda i: (("x", i), str(("x", i))),
                              lambda i: (i + 0.5, str(i + 0.5))]):
        # Keys with equal str(): sort_key ties only CPython's iteration order
        # breaks (min/max/sorted over sets, get_target's intersection).
        s = Spec(f"suite/str-twins-{v}")
        roots = [s.add(f"R{j}") for j in range(16)]
        mids = [s.add(f"M{j}", deps=[roots[j], roots[(j + 5) % 16]]) for j in range(16)]
        for i in range(24):
            a, b = twin(i)
            pair = [mids[i % 16], mids[(i * 7 + 3) % 16]] if i % 3 else [roots[i % 16], mids[(i * 5) % 16]]
            s.add(a, deps=pair)
            s.add(b, deps=pair[::-1])
        for i in range(6):  # a splitter whose two branches tie: sorted() must be stable
            split = s.add(f"S{i}", deps=[roots[i]])
            a, b = twin(100 + i)
            s.add(a, deps=[split])
            s.add(b, deps=[split])
            s.add(f"T{i}", deps=[a, b] if i % 2 else [b, a])
        yield s

    s = Spec("suite/duplicate-deps")
    s.add("a")
    s.add("b", deps=["a", "a", "a"])
    s.add("c", deps=["b", "a", "b"])
    yield s


def cycles():
    s = Spec("cycle/three")
    s.add("x", deps=["z"])
    s.add("y", deps=["x"])
    s.add("z", deps=["y"])
    yield s

    s = Spec("cycle/self")
    s.add("a")
    s.add("b", deps=["a", "b"])
    yield s

    s = Spec("cycle/behind-dag")
    for i in range(10):
        s.add(("r", i))
    for i in range(10):
        s.add(("m", i), deps=[("r", i), ("m", 3 + (i - 2) % 3)] if i in (3, 4, 5) else [("r", i)])
    s.add("end", deps=[("m", i) for i in range(10)])
    yield s

    for v in range(8):
        # getcycle may step onto a DataNode the pre-pass removed (dask then
        # raises KeyError) or find the cycle first, depending on set order.
        s = Spec(f"cycle/through-removed-datanode-{v}")
        x, z, data = f"x{v * 13}", f"z{v * 7}", ("data", v)
        s.add(x, deps=[z, data])
        s.add(z, deps=[x])
        s.add(f"y{v}", deps=[data])
        s.add(data, "D")
        yield s

    s = Spec("cycle/diamonds")  # nodes on the search stack twice: tied ranks
    s.add("a", deps=["b", "c"])
    s.add("b", deps=["d"])
    s.add("c", deps=["d"])
    s.add("d", deps=["e", "b", "c"])
    s.add("e")
    yield s


# ---- seeded random DAGs ---------------------------------------------------------

def random_key(rng, i, style):
    if style == "str":
        return f"{rng.choice(['inc', 'add', 'sum-chunk', 'getitem', 'ä-x'])}-{i:x}"
    if style == "tuple":
        return (rng.choice(["x-abc", "y-def", "z"]), i // 7, i % 7)
    if style == "int":
        return i * 1000003 - 50000
    return rng.choice([f"k{i}", ("t", i), i, i + 0.25, f"€{i}"])


def random_dags(count):
    rng = random.Random(7)
    shapes = ["layered", "random", "tree", "fan", "chains", "sparse"]
    for g in range(count):
        shape = shapes[g % len(shapes)]
        style = ["str", "tuple", "int", "mixed"][g % 4]
        n = rng.choice([5, 30, 200, 800, 2000, 3000]) if g > 5 else [1, 2, 3, 8, 40, 120][g]
        keys = [random_key(rng, i, style) for i in range(n)]
        s = Spec(f"random/{g:02d}-{shape}-{style}-{n}")
        deps = [[] for _ in range(n)]
        if shape == "layered":
            width = max(1, int(n ** 0.5))
            for i in range(width, n):
                lo = (i // width - 1) * width
                pop = range(lo, min(lo + width, i))
                deps[i] = rng.sample(pop, min(rng.choice([1, 1, 2, 3, 5]), len(pop)))
        elif shape == "random":
            for i in range(1, n):
                deps[i] = rng.sample(range(i), min(i, rng.choice([0, 1, 1, 2, 2, 3, 4, 8])))
        elif shape == "tree":
            for i in range(n - 1):  # node i feeds a later parent: a reduction
                deps[min(n - 1, i + 1 + rng.randrange(0, 4))].append(i)
        elif shape == "fan":
            hubs = max(1, n // 50)
            for i in range(hubs, n):
                deps[i] = rng.sample(range(hubs), min(hubs, rng.choice([1, 1, 2])))
            if n > hubs + 1:
                deps[-1] = list(range(hubs, n - 1))
        elif shape == "chains":
            for i in range(1, n):
                if rng.random() < 0.85:
                    deps[i] = [i - 1] + ([rng.randrange(i)] if rng.random() < 0.1 else [])
        else:  # sparse: many roots and leaves, some isolated nodes
            for i in range(1, n):
                if rng.random() < 0.3:
                    deps[i] = [rng.randrange(i)]
        # shuffle dsk order (a dict is not topologically ordered) and dependency order
        perm = list(range(n))
        rng.shuffle(perm)
        externals = [("ext", g, j) for j in range(rng.choice([0, 0, 0, 1, 3]))]
        for i in perm:
            ds = [keys[d] for d in dict.fromkeys(deps[i])]
            rng.shuffle(ds)
            if externals and rng.random() < 0.05:
                ds.append(rng.choice(externals))
            r = rng.random()
            if not ds and r < 0.15:
                s.add(keys[i], "D")
            elif len(ds) == 1 and r < 0.15:
                s.add(keys[i], "A", ds)
            else:
                s.add(keys[i], "T", ds)
        yield s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="only graphs whose name contains this")
    ap.add_argument("--random", type=int, default=30, help="number of random DAGs")
    args = ap.parse_args()
    t0 = time.monotonic()
    total = graphs = 0
    for source in (hand_made, cycles, lambda: random_dags(args.random), suite, workloads):
        for spec in source():
            if args.only in spec.name:
                total += record(spec)
                graphs += 1
            if spec.original is not None and args.only in "original/" + spec.name:
                # the materialized graph itself, with each frozenset built as
                # the client built it (nested containers included)
                orig = Spec("original/" + spec.name)
                orig.nodes = spec.nodes
                programs = [program_of(node) for node in spec.original.values()]
                total += record(orig, dsk=spec.original, programs=programs)
                graphs += 1
    print(f"gen_vectors: {graphs} graphs, {total} nodes, {time.monotonic() - t0:.1f} s", file=sys.stderr)

if __name__ == "__main__":
    main()
