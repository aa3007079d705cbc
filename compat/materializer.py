"""dask-go-scheduler graph materializer helper.

The Go scheduler starts this script (embedded in its binary, with
helper_wire.py, the wire's types, spec_pickling.py, how task specs are
pickled, and the modules for the requests other than materialize:
helper_feed.py and materializer_shuffle.py) with the
Python interpreter of the clients' environment and talks to it over
stdin/stdout; helper_wire.py describes every request and answer.

What it does for an update-graph is what Scheduler.update_graph does before
it touches scheduler state: deserialize the expression, materialize it
(__dask_graph__, annotations, convert_legacy_graph), and report per task its
key, dependencies, kind, data_producer, annotations and its GraphNode
pickled: whole in a small graph, else with references into an object table
for callables and bulky values (each distinct one pickled once per graph,
not once per task; spec_pickling.py). Culling (for LLGExpr) and dask.order run
in Go unless the request asks for ordering="python" (the fallback for dask
versions the Go port has not been checked against). Tasks are converted,
pickled and sent chunk by chunk, so the converted graph is never held whole.

The helper keeps no state between requests. stdout carries only protocol
frames (fd 1 is redirected to stderr so that prints in user code cannot
corrupt the stream); stderr is logged by Go.
"""

import ctypes
import gc
import logging
import numbers
import os
import sys
import textwrap

import msgpack

import dask
import dask.order
from dask._expr import LLGExpr
from dask._task_spec import (
    Alias,
    DataNode,
    GraphNode,
    Task,
    TaskRef,
    convert_legacy_graph,
    convert_legacy_task,
)
from distributed.core import error_message
from distributed.protocol import loads
from distributed.protocol.compression import decompress
from distributed.protocol.serialize import merge_and_deserialize
from distributed.versions import get_versions

import helper_wire as wire
import uploads
from spec_pickling import GraphSpecs, ObjectTable
from helper_feed import feed_setup
from materializer_shuffle import shuffle_run, worker_plugins

logger = logging.getLogger("daskgo.materializer")

# Tasks per answer message; the Go side may override it with
# DASKGO_MATERIALIZER_CHUNK. Chunks bound the size of one message and let
# Go decode one chunk while the next is being made.
CHUNK = int(os.environ.get("DASKGO_MATERIALIZER_CHUNK", "10000"))

# Exactly the text Scheduler.update_graph raises.
DESERIALIZATION_ERROR = textwrap.dedent(
    """\
    Error during deserialization of the task graph. This frequently
    occurs if the Scheduler and Client have different environments.
    For more information, see
    https://docs.dask.org/en/stable/deployment-considerations.html#consistent-software-environments
"""
)

# Graphs smaller than this free what they made by reference counting and the
# collector's own young-generation passes; a full collection and a
# malloc_trim (0.2-0.4 ms even after gc.freeze) would only add latency to
# the small computations a notebook runs one after another.
RELEASE_MIN_TASKS = 1000

# A graph of fewer tasks pickles each spec whole, as distributed's dumps
# does when Python's scheduler sends the task, callables included: on a few
# tasks the object table costs more than it saves (its pickler, a pickle per
# distinct callable, Go's splice of every reference, and on the worker a
# nested pickle.loads per reference). The helper's whole materialize, table
# against whole: 0.91 for a 4-chunk dask.array sum (9 tasks), 0.87 for 28
# tasks, 0.91 for 57, 1.02 for the 85 of a slice-and-mean, whose callables
# cost more to pickle per task (scripts/bench/helper_pickling.py, results in
# scripts/bench/results/latency/pause-25ms/helper-pickling.txt). A spec that
# comes out bulky goes through the table after all, so a value that several
# tasks share still crosses the pipe once.
PLAIN_BELOW_TASKS = int(os.environ.get("DASKGO_MATERIALIZER_PLAIN_BELOW", "64"))

def plain_key(key):
    """key with numpy scalars inside it made Python ints and floats.

    Graphs can carry keys such as ('ones_like-ab12', np.int64(0), np.int64(1))
    (dask.array's diagonal does). Python's scheduler keeps them as they are
    and pickles them on the wire; here keys travel to Go as msgpack, which
    has no numpy. The plain key is equal to the numpy one and hashes the
    same, so a worker's data dict and a TaskRef inside another task's spec
    still find each other."""
    t = type(key)
    if t is str or t is int or t is float:
        return key
    if t is tuple:
        for part in key:
            tp = type(part)
            if tp is not str and tp is not int and tp is not float:
                return tuple(plain_key(p) for p in key)
        return key
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return int(key)
    if isinstance(key, numbers.Real):
        return float(key)
    return key


def deserialize_expr(expr_ser):
    """Scheduler.update_graph's first step, with its error text."""
    try:
        header, frames = expr_ser.header, expr_ser.frames
        if "compression" in header:
            frames = decompress(header, frames)
        return merge_and_deserialize(header, frames)
    except Exception as e:
        raise RuntimeError(DESERIALIZATION_ERROR) from e


def materialize(req):
    """Yields the answer frames of a MaterializeRequest, chunk by chunk."""
    msg = req.msg
    keys = msg.get("keys") or ()
    expr = deserialize_expr(msg["expr_ser"])
    dsk = expr.__dask_graph__()
    annotations_by_type = {}
    for annotation_type, value in expr.__dask_annotations__().items():
        annotations_by_type.setdefault(annotation_type, {}).update(value)
    explicit_culling = isinstance(expr, LLGExpr)
    expected = len(dsk)  # lets Go size its arrays once
    del expr
    global_annotations = msg.get("annotations") or {}
    internal_priority = msg.get("internal_priority") or None
    ordered = bool(internal_priority) or req.ordering == "python"
    culled = False

    if req.ordering == "python" and not internal_priority:
        # the fallback: everything here, as update_graph does it
        dsk = convert_legacy_graph(dsk)
        if explicit_culling:
            dsk = cull_like_distributed(dsk, keys)
            culled = True
        internal_priority = dask.order.order(dsk)
        nodes = iter(dsk.items())
    else:
        nodes = converted(dsk)

    table = ObjectTable()
    specs = GraphSpecs(table, plain=expected < PLAIN_BELOW_TASKS)
    # the check compares Go's dask.order with Python's: nothing to compare
    # when neither runs (the client sent internal_priority) or Python's is used
    structure = [] if req.check_order and not ordered else None
    chunk = []
    # the per-task loop: a task without annotations or dependencies skips
    # the calls for them (the rows of a client.map are most of such tasks)
    annotated = bool(global_annotations or annotations_by_type)
    for key, node in nodes:
        key = plain_key(key)
        deps = node.dependencies
        deps = [plain_key(d) for d in deps] if deps else []
        kind = type(node).__name__
        if structure is not None:
            structure.append((key, deps, kind))
        spec, memo_base = specs.spec(node)
        chunk.append(
            [
                key,
                deps,
                kind,
                bool(node.data_producer),
                task_annotations(key, global_annotations, annotations_by_type) if annotated else None,
                spec,
                internal_priority.get(key) if internal_priority else None,
                memo_base,
            ]
        )
        if len(chunk) >= CHUNK:
            yield wire.graph_chunk(req.id, table.take_new(), chunk, expected)
            chunk = []
    del nodes, dsk
    check = None
    if structure is not None:
        check = check_order(structure, keys, explicit_culling and not culled)
        del structure
    objects = table.take_new()
    del table, specs
    if expected >= RELEASE_MIN_TASKS:
        release_memory()
    final = {"culled": culled, "explicit_culling": explicit_culling, "ordered": ordered, "check_order": check}
    yield wire.graph_chunk(req.id, objects, chunk, expected, final)


def converted(dsk):
    """convert_legacy_graph's loop, yielding each node instead of building a
    second dict: the converted graph is never held whole."""
    all_keys = set(dsk)
    for k, arg in dsk.items():
        t = convert_legacy_task(k, arg, all_keys)
        if isinstance(t, Alias) and t.target == k:
            continue
        elif not isinstance(t, GraphNode):
            t = DataNode(k, t)
        yield k, t


def cull_like_distributed(dsk, keys):
    """distributed.scheduler._cull: keep what the requested keys reach, in
    the order its set pops them (the ordering=python path only)."""
    work = set(keys)
    seen = set()
    out = {}
    while work:
        k = work.pop()
        if k in seen or k not in dsk:
            continue
        seen.add(k)
        out[k] = v = dsk[k]
        work.update(v.dependencies)
    return out


def _no_op(*args):
    return None


def check_order(structure, keys, cull):
    """dask.order.order on the graph rebuilt from what Go received (keys,
    dependency lists in the order sent, kinds), culled as Go culls it
    (reachable from keys, in graph order): the reference Go's port must
    equal. Nodes are rebuilt so that each dependency frozenset is built
    exactly as Go emulates it (Task.__init__ over the list). Only
    meaningful with string hashing fixed (PYTHONHASHSEED set to the seed Go
    orders with, as the Go side starts this helper): dask.order iterates
    sets, so its result depends on the hash seed."""
    if not os.environ.get("PYTHONHASHSEED", "").isdigit():
        logger.warning("check_order needs a fixed PYTHONHASHSEED; not checked")
        return None
    if cull:
        pos = {k: i for i, (k, _, _) in enumerate(structure)}
        keep = [False] * len(structure)
        work = [pos[k] for k in keys if k in pos]
        while work:
            i = work.pop()
            if keep[i]:
                continue
            keep[i] = True
            work.extend(pos[d] for d in structure[i][1] if d in pos)
        structure = [s for s, kept in zip(structure, keep) if kept]
    dsk = {}
    for key, deps, kind in structure:
        if kind == "DataNode":
            dsk[key] = DataNode(key, None)
        elif kind == "Alias":
            dsk[key] = Alias(key, deps[0])
        else:
            dsk[key] = Task(key, _no_op, *[TaskRef(d) for d in deps])
    prio = dask.order.order(dsk)
    return [prio[key] for key, _, _ in structure]


def task_annotations(key, global_annotations, annotations_by_type):
    """SchedulerState._apply_annotations: global annotations (callables called
    with the key), then layer annotations that are not None override. None
    when the task has none."""
    if not global_annotations and not annotations_by_type:
        return None
    out = {}
    for name, value in global_annotations.items():
        if callable(value):
            value = value(key)
        out[name] = value
    for name, by_key in annotations_by_type.items():
        value = by_key.get(key)
        if value is not None:
            out[name] = value
    if not out:
        return None
    return {name: wire.msgpack_safe(v) for name, v in out.items()}


def release_memory():
    """Give a freed graph's memory back to the operating system: collect
    cycles, then ask glibc to return its free heap (CPython frees whole
    arenas itself; what malloc keeps is the rest).

    What survives the collection is the process's own: modules, classes and
    caches that dask and the graph's imports made. gc.freeze() moves it out
    of the collector's sight, so the next collection walks only what the
    next graph made. Without it every graph paid a full walk of everything
    dask imports, 7-14 ms, most of a one-task graph's round trip.
    Frozen objects are still freed by reference counting; only a cycle
    among them would stay (the helper is recycled when it grows,
    helper_recycle.go)."""
    gc.collect()
    gc.freeze()
    if _malloc_trim is not None:
        _malloc_trim(0)


def _find_malloc_trim():
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_malloc_trim = _find_malloc_trim() if sys.platform.startswith("linux") else None


def error_frames(req_id):
    """The error answer for the exception being handled (call it inside an
    except block: error_message reads the traceback from sys.exc_info)."""
    return wire.error_answer(req_id, error_message(sys.exc_info()[1]))


def request_id(frames):
    """The id of a request whose blobs could not be loaded."""
    try:
        head = msgpack.loads(frames[0], raw=False, strict_map_key=False)
        return head.get("id")
    except Exception:
        return None


def profiled(gen, req):
    """gen(req), under cProfile when DASKGO_HELPER_PROFILE_DIR names a
    directory (scripts/bench.sh --profile): helper-PID-ID.prof per graph."""
    where = os.environ.get("DASKGO_HELPER_PROFILE_DIR")
    if not where:
        yield from gen(req)
        return
    import cProfile

    prof = cProfile.Profile()
    it = gen(req)
    try:
        while True:
            prof.enable()
            try:
                frames = next(it)
            except StopIteration:
                return
            finally:
                prof.disable()
            yield frames  # writing the answer is profiled by Go's side of the pipe
    finally:
        prof.dump_stats(os.path.join(where, f"helper-{os.getpid()}-{req.id}.prof"))


def handle(out, req):
    if isinstance(req, wire.VersionsRequest):
        wire.write_message(out, wire.versions_answer(req.id, get_versions(), worker_plugins()))
        return
    uploads.catch_up()  # what is unpickled below may name an uploaded module
    if isinstance(req, wire.MaterializeRequest):
        # No cyclic collection while a graph is made: its objects live until
        # it is answered, so each pass walks them and frees little. On a
        # 20k-task client.map that was 2 full and 147 younger passes, about
        # 18 ms, some 8 % of the helper's CPU there (helper_map_stages.py
        # --gc, scripts/bench/results/per-message/helper-map/). Reference
        # counting still frees what the graph drops; cycles wait for
        # release_memory (graphs of RELEASE_MIN_TASKS or more) or for the
        # collector's next pass once it is on again.
        gc.disable()
        try:
            for frames in profiled(materialize, req):
                wire.write_message(out, frames)
        except Exception as e:
            logger.info("materialize %s failed: %r", req.id, e)
            wire.write_message(out, error_frames(req.id))
            release_memory()
        finally:
            gc.enable()
    elif isinstance(req, wire.ShuffleRunRequest):
        try:
            frames = shuffle_run(req)
        except Exception as e:
            logger.info("shuffle_run %s failed: %r", req.id, e)
            frames = error_frames(req.id)
        wire.write_message(out, frames)
    elif isinstance(req, wire.FeedSetupRequest):
        try:
            frames = wire.feed_setup_answer(req.id, feed_setup(req))
        except Exception as e:
            logger.info("feed_setup %s failed: %r", req.id, e)
            frames = error_frames(req.id)
        wire.write_message(out, frames)


def serve(inp, out):
    while True:
        frames = wire.read_message(inp)
        if frames is None:
            return
        try:
            raw = loads(frames, deserialize=False)
        except Exception as e:
            req_id = request_id(frames)
            if req_id is None:
                raise wire.ProtocolError(f"undecodable request: {e!r}") from e
            wire.write_message(out, error_frames(req_id))
            continue
        try:
            req = wire.parse_request(raw)
        except Exception:
            wire.write_message(out, error_frames(raw.get("id") if isinstance(raw, dict) else None))
            continue
        handle(out, req)


def main():
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    gc.collect()
    gc.freeze()  # the imports above are the process's own (release_memory)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        serve(sys.stdin.buffer, out)
    except wire.ProtocolError as e:
        print(f"materializer helper: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
