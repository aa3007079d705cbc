"""Round trip of run_specs through the helper and Go's splicing
(compat/runspec_test.go drives it):

    runspec_roundtrip.py make DIR    # update-graph messages, as a Client sends them -> DIR/<name>.bin
    runspec_roundtrip.py make DIR big  # one 100k-task tree (DASKGO_BIG_GRAPH_TASKS) -> DIR/big.bin
    runspec_roundtrip.py check DIR   # DIR/<name>.specs.bin (Go's payloads) vs stock materialization

`make` builds graphs whose nodes cover what a run_spec can hold: functions
defined in __main__ (pickled by value), lambdas, closures, partials, bound
methods, builtins, a class defined in __main__ (the helper's fallback path),
nested containers with key references, aliases, data nodes with numpy
arrays, big ints, bytes, sets, kwargs, the same callable twice in one task,
and dask.array and annotated graphs.

`check` loads each message again, materializes it the way
Scheduler.update_graph does (deserialize, __dask_graph__,
convert_legacy_graph), unpickles every payload Go assembled for it (the
way a worker does: distributed.protocol.pickle.loads), and requires for
every key: the same type, equality (GraphNode.__eq__), the same
dependencies, the same sharing of objects inside the task, and the same
result when the whole graph is executed with both versions. It prints one
line per graph and exits non-zero on the first difference.
"""

from __future__ import annotations

import functools
import operator
import os
import struct
import sys

import numpy as np

import dask
import dask.array as da
from dask._expr import LLGExpr
from dask._task_spec import DataNode, GraphNode, Task, TaskRef, convert_legacy_graph
from dask.base import collections_to_expr
from distributed.protocol import dumps, loads
from distributed.protocol.pickle import loads as pickle_loads
from distributed.protocol.serialize import Serialized, ToPickle, merge_and_deserialize, serialize, to_serialize


def inc(x):
    return x + 1


def add(x, y):
    return x + y


def apply_twice(f, g, x):
    """Identity inside a task: f and g are the same object in the graph."""
    return (f(g(x)), f is g)


class Scale:
    def __init__(self, k):
        self.k = k

    def times(self, x):
        return self.k * x


class Point:  # defined in __main__: plain pickle cannot, distributed's can
    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Point) and other.x == self.x

    def __hash__(self):
        return hash(self.x)


def take_point(p, y):
    return p.x + y


def make_closure(n):
    def shift(x):
        return x + n

    return shift


def kw(x, *, scale=1, offset=0):
    return x * scale + offset


def legacy_graph():
    shift = make_closure(10)
    dsk = {
        "a": 1,
        "b": (inc, "a"),
        "c": (add, "a", "b"),
        "lam": (lambda x: x * 3, "c"),
        "clo": (shift, "lam"),
        "part": (functools.partial(add, 100), "clo"),
        "meth": (Scale(7).times, "part"),
        "builtin": (operator.mul, "meth", 2),
        "lst": (sum, ["a", "b", (inc, "c")]),
        "tup": (len, ("a", "b", "c")),
        # (legacy graphs do not resolve keys inside a dict argument)
        "dct": (dask.utils.apply, kw, ["a"], {"scale": 2, "offset": 5}),
        "setarg": (sorted, {1, 2, 3}),
        "alias": "c",
        "arr": np.arange(12.0).reshape(3, 4),
        "arrsum": (np.sum, "arr"),
        "big": (add, 2**70, "a"),
        "bytes": (len, b"\x00\x01bytes"),
        "twice": (apply_twice, inc, inc, "a"),
        "point": (take_point, Point(5), "a"),
        "none": (operator.is_, None, None),
        "floaty": (add, 1.5, "a"),
        ("tuple-key", 0): (inc, "b"),
        ("tuple-key", 1): (add, ("tuple-key", 0), "c"),
    }
    keys = list(dsk)
    return LLGExpr(dsk), keys


def new_style_graph():
    dsk = {
        "n1": DataNode("n1", np.ones(5)),
        "n2": Task("n2", np.multiply, TaskRef("n1"), 2.0),
        "n3": Task("n3", kw, TaskRef("n2"), scale=3, offset=TaskRef("n1")),
        "n4": Task("n4", inc, 41, _data_producer=True),
    }
    return LLGExpr(dsk), ["n3", "n4"]


SHARED_BLOB = bytes(range(256)) * 256  # 64 KiB, one object in every task below
SHARED_ARRAY = np.arange(2048.0)  # 16 KiB


def blob_len(blob, i):
    return len(blob) + i


def both(a, b):
    return (len(a), a is b)


def bulky_graph():
    """Large bytes and arrays shared by many tasks: pickled once into the
    helper's object table, spliced back into each task's payload."""
    dsk = {("b", i): (blob_len, SHARED_BLOB, i) for i in range(50)}
    dsk["arr-sum"] = (np.sum, SHARED_ARRAY)
    dsk["same-twice"] = (both, SHARED_BLOB, SHARED_BLOB)  # one object twice: the memo keeps it one
    dsk["own-blob"] = (len, bytes(8192))
    dsk["small"] = (len, b"tiny")
    return LLGExpr(dsk), list(dsk)


def array_graph():
    x = da.arange(40, chunks=7).reshape(5, 8).rechunk((2, 3))
    y = (x + 1).sum(axis=0) * da.ones(8, chunks=4)
    expr = collections_to_expr([y], optimize_graph=True).optimize()
    return expr, list(expr.__dask_keys__()) if hasattr(expr, "__dask_keys__") else None


def annotated_graph():
    with dask.annotate(retries=2, priority=3):
        x = da.ones(10, chunks=5) + 1
    expr = collections_to_expr([x.sum()], optimize_graph=False).optimize()
    return expr, None


def big_graph(n=int(os.environ.get("DASKGO_BIG_GRAPH_TASKS", "100000"))):
    """A reduction tree of n / 2 leaves of inc (a __main__ function): what a
    large client.get sends, for the helper's memory test."""
    dsk = {("leaf", i): (inc, i) for i in range(n // 2)}
    level, depth = [("leaf", i) for i in range(n // 2)], 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level), 2):
            k = (f"add-{depth}", j // 2)
            pair = level[j:j + 2]
            dsk[k] = (add, *pair) if len(pair) == 2 else (inc, pair[0])
            nxt.append(k)
        level, depth = nxt, depth + 1
    return LLGExpr(dsk), [level[0]]


# big is made only when asked for (make DIR big): it is not part of check
BIG = {"big": big_graph}

GRAPHS = {
    "legacy": legacy_graph,
    "new_style": new_style_graph,
    "bulky": bulky_graph,
    "array": array_graph,
    "annotated": annotated_graph,
}


def flatten_keys(keys):
    out = []
    for k in keys:
        if isinstance(k, list):
            out.extend(flatten_keys(k))
        else:
            out.append(k)
    return out


def build(name):
    expr, keys = {**GRAPHS, **BIG}[name]()
    if keys is None:
        keys = flatten_keys(expr.__dask_keys__())
    return expr, flatten_keys(keys)


def write_framed(path, frames):
    lengths = [memoryview(f).nbytes for f in frames]
    with open(path, "wb") as f:
        f.write(struct.pack(f"<QQ{len(frames)}Q", 8 * (1 + len(frames)) + sum(lengths), len(frames), *lengths))
        for fr in frames:
            f.write(fr)


def read_framed(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[8:16])[0]
    lengths = struct.unpack(f"<{n}Q", b[16:16 + 8 * n])
    frames, o = [], 16 + 8 * n
    for ln in lengths:
        frames.append(b[o:o + ln])
        o += ln
    return frames


def make(out, which=None):
    graphs = BIG if which == "big" else GRAPHS
    for name in graphs:
        expr, keys = build(name)
        msg = {
            "op": "update-graph",
            "expr_ser": Serialized(*serialize(to_serialize(expr), on_error="raise")),
            "keys": set(keys),
            "internal_priority": None,
            "submitting_task": None,
            "fifo_timeout": 0,
            "actors": None,
            "code": ToPickle(()),
            "annotations": ToPickle({}),
            "span_metadata": ToPickle({}),
        }
        write_framed(os.path.join(out, f"{name}.bin"), dumps(msg))
    print("made", ", ".join(graphs))


def reference(path):
    """Scheduler.update_graph's materialization of the recorded message."""
    msg = loads(read_framed(path), deserialize=False)
    ser = msg["expr_ser"]
    expr = merge_and_deserialize(ser.header, ser.frames)
    return convert_legacy_graph(expr.__dask_graph__())


def execute(dsk):
    """Run a graph of GraphNodes in dependency order."""
    done = {}
    pending = dict(dsk)
    while pending:
        progressed = False
        for k, node in list(pending.items()):
            deps = node.dependencies
            if all(d in done for d in deps):
                done[k] = node({d: done[d] for d in deps})
                del pending[k]
                progressed = True
        if not progressed:
            raise RuntimeError(f"graph does not run: {sorted(map(str, pending))[:5]}")
    return done


def same_value(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return a == b


def forget_tokens(obj, seen=None):
    """Clear Task._token, a cache of tokenize(): a process computes it on
    first use, and for objects dask cannot tokenize deterministically (a
    Compose of partials, say) its value differs from process to process,
    so the helper's cached token need not equal this process's. Equality
    is then judged by tokens computed here, for both sides."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Task):
        obj._token = None
        for a in (obj.func, *obj.args, *obj.kwargs.values()):
            forget_tokens(a, seen)
    elif isinstance(obj, dict):
        for v in obj.values():
            forget_tokens(v, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            forget_tokens(v, seen)


def shared_ids(node):
    """Which positions of a Task's args hold the same object: the sharing
    a pickle memo keeps."""
    if not isinstance(node, Task):
        return ()
    objs = [node.func, *node.args, *node.kwargs.values()]
    return tuple((i, j) for i in range(len(objs)) for j in range(i + 1, len(objs)) if objs[i] is objs[j]
                 and not isinstance(objs[i], (int, str, float, type(None), bool)))


def check(out):
    failures = []
    for name in GRAPHS:
        ref = reference(os.path.join(out, f"{name}.bin"))
        got = {}
        payloads = loads(read_framed(os.path.join(out, f"{name}.specs.bin")))["specs"]
        for key, pickled in payloads:
            key = tuple(key) if isinstance(key, list) else key
            got[key] = pickle_loads(pickled)
        if set(got) != set(ref):
            failures.append(f"{name}: keys differ: go {sorted(map(str, got))} ref {sorted(map(str, ref))}")
            continue
        for k, r in ref.items():
            g = got[k]
            forget_tokens(g)
            forget_tokens(r)
            if type(g) is not type(r):
                failures.append(f"{name} {k}: type {type(g).__name__}, stock {type(r).__name__}")
            elif g.dependencies != r.dependencies:
                failures.append(f"{name} {k}: dependencies {g.dependencies} != {r.dependencies}")
            elif not (g == r):
                failures.append(f"{name} {k}: {g!r} != {r!r}")
            elif shared_ids(g) != shared_ids(r):
                failures.append(f"{name} {k}: shared objects {shared_ids(g)} != {shared_ids(r)}")
        if failures:
            continue
        rg, rr = execute(got), execute(ref)
        for k in ref:
            if not same_value(rg[k], rr[k]):
                failures.append(f"{name} {k}: result {rg[k]!r} != {rr[k]!r}")
        print(f"{name}: {len(ref)} tasks identical and run to the same results")
    if failures:
        print("\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](*sys.argv[2:])
