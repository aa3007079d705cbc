"""dask-go-scheduler graph materializer helper.

The Go scheduler starts this script (embedded in its binary) with the Python
interpreter of the clients' environment and talks to it over stdin/stdout.
Every message in either direction is one dask-framed message: u64 N,
u64 nframes, nframes x u64 lengths, then the frames (the layout of
distributed/comm/tcp.py), whose contents are made and read by
distributed.protocol.dumps/loads, so __Serialized__ and __Pickled__ blobs
relayed from the client's update-graph arrive exactly as the Python scheduler
would receive them.

Requests, handled strictly in order, one at a time:

    {"op": "materialize", "id": N, "msg": <update-graph op dict>}
    {"op": "versions", "id": N}
        -> {"versions": get_versions(), "worker_plugins": {"shuffle": bytes}}
    {"op": "shuffle_run", "id": N, "shuffle_id", "run_id", "barrier":
     <the barrier task's pickled P2PBarrierTask>, "workers": [...],
     "existing": [[partition, worker], ...], "span_id"}
        -> {"run_spec": <pickled ShuffleRunSpec>, "worker_for":
            [[partition, worker], ...], "workers": [distinct workers]}

Responses carry the request's id and "done"; a materialize answer may come in
several chunks of "tasks" (done false ... done true). On failure a single
{"id", "status": "error", "done": true, **distributed.core.error_message(e)}
replaces whatever chunks were still to come.

The helper is stateless: the Go side stores everything it returns.
stdout carries only protocol frames (fd 1 is redirected to stderr so that
prints in user code cannot corrupt the stream); stderr is logged by Go.
"""

import os
import sys

# Like the `dask scheduler` console script, never import from the working
# directory: a stray collections.py there would shadow the stdlib.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

import logging  # noqa: E402
import numbers  # noqa: E402
import struct  # noqa: E402
import textwrap  # noqa: E402

import msgpack  # noqa: E402

import dask  # noqa: E402
import dask.order  # noqa: E402
from dask._expr import LLGExpr  # noqa: E402
from dask._task_spec import convert_legacy_graph  # noqa: E402
from distributed.core import error_message  # noqa: E402
from distributed.protocol import dumps, loads  # noqa: E402
from distributed.protocol.compression import decompress  # noqa: E402
from distributed.protocol.serialize import ToPickle, merge_and_deserialize  # noqa: E402
from distributed.protocol.pickle import dumps as pickle_dumps  # noqa: E402
from distributed.shuffle._core import P2PBarrierTask, ShuffleRunSpec  # noqa: E402
from distributed.shuffle._worker_plugin import ShuffleWorkerPlugin  # noqa: E402
from distributed.versions import get_versions  # noqa: E402

logger = logging.getLogger("daskgo.materializer")

# Tasks per response message; the Go side may override it with
# DASKGO_MATERIALIZER_CHUNK. Chunks bound the size of one message for
# graphs of hundreds of thousands of tasks.
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

MAX_INT = 2**64 - 1
MIN_INT = -(2**63)


class ProtocolError(Exception):
    """The byte stream from Go is unusable; the helper exits."""


def read_exactly(stream, n):
    chunks = []
    while n > 0:
        b = stream.read(n)
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def read_message(stream):
    """Read one framed message; None on a clean EOF between messages."""
    prelude = read_exactly(stream, 16)
    if prelude is None:
        return None
    _, nframes = struct.unpack("<QQ", prelude)
    if nframes == 0 or nframes > 1 << 20:
        raise ProtocolError(f"frame count {nframes} out of range")
    raw = read_exactly(stream, 8 * nframes)
    if raw is None:
        raise ProtocolError("EOF inside the frame lengths")
    lengths = struct.unpack(f"<{nframes}Q", raw)
    frames = []
    for n in lengths:
        f = read_exactly(stream, n) if n else b""
        if f is None:
            raise ProtocolError("EOF inside a frame")
        frames.append(f)
    return frames


def write_message(stream, frames):
    lengths = [memoryview(f).nbytes for f in frames]
    n = 8 * (1 + len(frames)) + sum(lengths)
    stream.write(struct.pack(f"<QQ{len(frames)}Q", n, len(frames), *lengths))
    for f in frames:
        stream.write(f)
    stream.flush()


def msgpack_safe(value):
    """Annotation values travel to Go and on to workers as msgpack: sets and
    tuples become lists, numpy-like numbers plain numbers, and anything else
    msgpack cannot carry a ToPickle (what distributed's dumps falls back to)."""
    if value is None or isinstance(value, (bool, str, bytes, float)):
        return value
    if isinstance(value, int):
        return value if MIN_INT <= value <= MAX_INT else ToPickle(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return [msgpack_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: msgpack_safe(v) for k, v in value.items()}
    if isinstance(value, numbers.Integral):
        return msgpack_safe(int(value))
    if isinstance(value, numbers.Real):
        return float(value)
    return ToPickle(value)


def deserialize_expr(expr_ser):
    """Scheduler.update_graph's first step, with its error text."""
    try:
        header, frames = expr_ser.header, expr_ser.frames
        if "compression" in header:
            frames = decompress(header, frames)
        return merge_and_deserialize(header, frames)
    except Exception as e:
        raise RuntimeError(DESERIALIZATION_ERROR) from e


def materialize(msg):
    """update_graph + _materialize_graph + _cull + order, then per-task facts.

    Yields lists of task dicts (chunks)."""
    keys = set(msg.get("keys") or ())
    expr = deserialize_expr(msg["expr_ser"])
    dsk = expr.__dask_graph__()
    annotations_by_type = {}
    for annotation_type, value in expr.__dask_annotations__().items():
        annotations_by_type.setdefault(annotation_type, {}).update(value)
    dsk = convert_legacy_graph(dsk)
    if isinstance(expr, LLGExpr):
        dsk = cull(dsk, keys)
    del expr
    internal_priority = msg.get("internal_priority")
    if not internal_priority:
        internal_priority = dask.order.order(dsk)
    global_annotations = msg.get("annotations") or {}

    chunk = []
    for key, node in dsk.items():
        chunk.append(
            {
                "key": key,
                "deps": list(node.dependencies),
                "order": internal_priority.get(key),
                "kind": type(node).__name__,
                "data_producer": bool(node.data_producer),
                "annotations": task_annotations(
                    key, global_annotations, annotations_by_type
                ),
                "run_spec": ToPickle(node),
            }
        )
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    yield chunk


def cull(dsk, keys):
    """distributed.scheduler._cull: keep what the requested keys reach."""
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


def task_annotations(key, global_annotations, annotations_by_type):
    """SchedulerState._apply_annotations: global annotations (callables called
    with the key), then layer annotations that are not None override."""
    out = {}
    for name, value in global_annotations.items():
        if callable(value):
            value = value(key)
        out[name] = value
    for name, by_key in annotations_by_type.items():
        value = by_key.get(key)
        if value is not None:
            out[name] = value
    return {name: msgpack_safe(v) for name, v in out.items()}


def worker_plugins():
    """The worker plugins every register-worker reply carries: the P2P
    shuffle plugin, pickled as ShuffleSchedulerPlugin.start registers it."""
    return {"shuffle": pickle_dumps(ShuffleWorkerPlugin())}


def shuffle_run(req):
    """The Python half of ShuffleSchedulerPlugin._create: pick a worker for
    every output partition (keeping the partitions an aligned shuffle already
    placed) and build the ShuffleRunSpec with the run id Go chose."""
    barrier = req.get("barrier")
    if not isinstance(barrier, P2PBarrierTask):
        raise TypeError(
            f"shuffle_run: the barrier's run_spec is a {type(barrier).__name__}, not a P2PBarrierTask"
        )
    spec = barrier.spec
    if spec.id != req.get("shuffle_id"):
        raise ValueError(f"shuffle_run: barrier of shuffle {spec.id!r}, asked for {req.get('shuffle_id')!r}")
    workers = list(req.get("workers") or ())
    if not workers:
        raise ValueError(f"shuffle_run: no workers for shuffle {spec.id!r}")
    # msgpack arrays arrive as tuples, so array partitions compare equal
    existing = dict(req.get("existing") or ())
    worker_for = {}
    for partition in spec.output_partitions:
        worker = existing.get(partition)
        if worker is None:
            worker = spec.pick_worker(partition, workers)
        worker_for[partition] = worker
    run_spec = ShuffleRunSpec(spec=spec, worker_for=worker_for, span_id=req.get("span_id"))
    # run_id is a per-process counter in distributed; the scheduler owns it
    object.__setattr__(run_spec, "run_id", int(req["run_id"]))
    return {
        "run_spec": ToPickle(run_spec),
        "worker_for": [[msgpack_safe(p), w] for p, w in worker_for.items()],
        "workers": sorted(set(worker_for.values())),
    }


def handle_shuffle_run(out, req_id, req):
    try:
        frames = dumps({"id": req_id, "status": "OK", "done": True, **shuffle_run(req)})
    except Exception as e:
        logger.info("shuffle_run %s failed: %r", req_id, e)
        frames = error_frames(req_id)
    write_message(out, frames)


def error_frames(req_id):
    """The error response for the exception being handled (call it inside an
    except block: error_message reads the traceback from sys.exc_info)."""
    msg = error_message(sys.exc_info()[1])
    msg.pop("status", None)
    return dumps({"id": req_id, "status": "error", "done": True, **msg})


def handle_materialize(out, req_id, msg):
    try:
        for chunk in materialize(msg):
            frames = dumps({"id": req_id, "status": "OK", "done": False, "tasks": chunk})
            write_message(out, frames)
        write_message(out, dumps({"id": req_id, "status": "OK", "done": True, "tasks": []}))
    except Exception as e:
        logger.info("materialize %s failed: %r", req_id, e)
        write_message(out, error_frames(req_id))


def request_id(frames):
    """The id of a request whose blobs could not be loaded."""
    try:
        head = msgpack.loads(frames[0], raw=False, strict_map_key=False)
        return head.get("id")
    except Exception:
        return None


def serve(inp, out):
    while True:
        frames = read_message(inp)
        if frames is None:
            return
        try:
            req = loads(frames, deserialize=False)
        except Exception as e:
            req_id = request_id(frames)
            if req_id is None:
                raise ProtocolError(f"undecodable request: {e!r}") from e
            write_message(out, error_frames(req_id))
            continue
        req_id = req.get("id")
        op = req.get("op")
        if op == "materialize":
            handle_materialize(out, req_id, req.get("msg") or {})
        elif op == "versions":
            write_message(
                out,
                dumps(
                    {
                        "id": req_id,
                        "status": "OK",
                        "done": True,
                        "versions": get_versions(),
                        "worker_plugins": worker_plugins(),
                    }
                ),
            )
        elif op == "shuffle_run":
            handle_shuffle_run(out, req_id, req)
        else:
            try:
                raise ValueError(f"materializer helper: unknown op {op!r}")
            except ValueError:
                write_message(out, error_frames(req_id))


def main():
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        serve(sys.stdin.buffer, out)
    except ProtocolError as e:
        print(f"materializer helper: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
