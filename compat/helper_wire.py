"""The wire between the Go scheduler and its materializer helper: every kind
of request and answer, in one place (its Go twin is compat/helperwire.go;
change both together and bump WIRE_VERSION). Its framing, read_message and
write_message, is also the scheduler-side host's (host.py), whose messages
are otherwise its own.

Both directions carry dask-framed messages on the helper's stdin/stdout:
u64 N, u64 nframes, nframes x u64 lengths, then the frames (the layout of
distributed/comm/tcp.py). Their contents are made and read by
distributed.protocol.dumps/loads, so the __Serialized__ expression of an
update-graph is relayed from the client byte for byte and annotation values
msgpack cannot carry travel as __Pickled__ blobs.

Requests (Go -> helper), handled strictly in order, one at a time:

    versions     {"op", "id"}
    materialize  {"op", "id", "msg": <the client's update-graph op>,
                  "ordering": "go" | "python", "check_order": bool}
    shuffle_run  {"op", "id", "shuffle_id", "run_id", "barrier": <pickled
                  P2PBarrierTask>, "workers", "existing", "span_id"}
    feed_setup   {"op", "id", "setup", "function", "teardown": <the feed op's
                  pickled closures, or None>, "group_keys": [key, ...] or None}

Answers (helper -> Go) carry the request's "id", "status" ("OK" or
"error") and "done":

    versions     {"versions": get_versions(), "worker_plugins": {name: pickle},
                  "wire": WIRE_VERSION}
    materialize  one or more graph chunks:
                  {"objects": [pickle, ...], "tasks": [TASK, ...], "done": bool,
                   "expected": int}  (an upper bound of the graph's tasks)
                 the last one (done true) also carries
                  {"culled": bool, "explicit_culling": bool, "ordered": bool,
                   "check_order": [int, ...] or None}
    shuffle_run  {"run_spec": <pickled ShuffleRunSpec>, "worker_for":
                  [[partition, worker], ...], "workers": [...]}
    feed_setup   {"kind": "progress" | "multi" | "generic", "keys": [key, ...],
                  "complete": bool, "group_by": "prefix" | "spans" | "custom",
                  "groups": [group_by(key) for key in group_keys] or None}
                 (kind "generic" carries nothing else: not a progress bar's)
    error        {"status": "error", "done": true, **error_message(e)}
                  (replaces whatever chunks were still to come)

A TASK is a list indexed by the TASK_* constants. Its "spec" is the task's
GraphNode pickled with references into the graph's object table, which grows
by the "objects" of each chunk (an object arrives in the chunk of the first
task that uses it): persistent ids, or gets of a memo pre-populated with the
table from TABLE_MEMO_BASE, the task's own memo entries then numbered from
its "memo_base". The Go side renumbers those and splices the objects back in
when it sends the task (protocol/pickle/splice.go).
"""

from __future__ import annotations

import numbers
import struct
from dataclasses import dataclass

from distributed.protocol import dumps
from distributed.protocol.serialize import ToPickle

WIRE_VERSION = 4

# A task record: [key, deps, kind, data_producer, annotations, spec, order, memo_base]
TASK_KEY = 0  # the dask key (str, int, float or tuple)
TASK_DEPS = 1  # list(node.dependencies): the node's frozenset in iteration order
TASK_KIND = 2  # type(node).__name__: Task, Alias, DataNode, List, ..., P2PBarrierTask
TASK_DATA_PRODUCER = 3  # node.data_producer
TASK_ANNOTATIONS = 4  # dict of msgpack-safe values, or None
TASK_SPEC = 5  # bytes: the node pickled with references into the object table (see above)
TASK_ORDER = 6  # int priority (python ordering or the client's internal_priority), or None
TASK_MEMO_BASE = 7  # int: the first memo index of the spec's own entries (0 without a pre-populated memo)
TASK_FIELDS = 8

# The memo index of the object table's first entry in a spec pickled with a
# pre-populated memo (protocol/pickle/splice.go TableMemoBase).
TABLE_MEMO_BASE = 1 << 30

MAX_FRAMES = 1 << 20


class ProtocolError(Exception):
    """The byte stream from Go is unusable; the helper exits."""


# ---- framing -----------------------------------------------------------------


def _read_exactly(stream, n):
    chunks = []
    while n > 0:
        b = stream.read(n)
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def read_message(stream):
    """One framed message as its list of frames; None on a clean EOF."""
    prelude = _read_exactly(stream, 16)
    if prelude is None:
        return None
    _, nframes = struct.unpack("<QQ", prelude)
    if nframes == 0 or nframes > MAX_FRAMES:
        raise ProtocolError(f"frame count {nframes} out of range")
    raw = _read_exactly(stream, 8 * nframes)
    if raw is None:
        raise ProtocolError("EOF inside the frame lengths")
    frames = []
    for n in struct.unpack(f"<{nframes}Q", raw):
        f = _read_exactly(stream, n) if n else b""
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


# ---- values --------------------------------------------------------------------

MAX_INT = 2**64 - 1
MIN_INT = -(2**63)


def msgpack_safe(value):
    """Annotation values (and a shuffle's output partitions) travel to Go and
    on to workers as msgpack: sets and tuples become lists, numpy-like
    numbers plain numbers, and anything else msgpack cannot carry a ToPickle
    (what distributed's dumps falls back to). Here, beside the answers,
    because both the materializer and materializer_shuffle make them."""
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


# ---- requests ----------------------------------------------------------------


@dataclass
class VersionsRequest:
    id: int


@dataclass
class MaterializeRequest:
    id: int
    msg: dict
    ordering: str  # "go": Go runs dask.order; "python": dask.order.order here
    check_order: bool  # also order here (sanitized, see materializer.check_order)


@dataclass
class ShuffleRunRequest:
    id: int
    shuffle_id: str
    run_id: int
    barrier: object
    workers: list
    existing: list
    span_id: object


@dataclass
class FeedSetupRequest:
    id: int
    setup: bytes | None
    function: bytes | None
    teardown: bytes | None
    group_keys: list | None


def parse_request(req: dict):
    """The typed request for a decoded request dict; ValueError names what is
    wrong (the caller answers it as an error for the request's id)."""
    op = req.get("op")
    rid = req.get("id")
    if op == "versions":
        return VersionsRequest(rid)
    if op == "materialize":
        ordering = req.get("ordering") or "go"
        if ordering not in ("go", "python"):
            raise ValueError(f"materialize: ordering {ordering!r}, expected 'go' or 'python'")
        return MaterializeRequest(rid, req.get("msg") or {}, ordering, bool(req.get("check_order")))
    if op == "shuffle_run":
        return ShuffleRunRequest(
            rid,
            req.get("shuffle_id"),
            int(req["run_id"]),
            req.get("barrier"),
            list(req.get("workers") or ()),
            list(req.get("existing") or ()),
            req.get("span_id"),
        )
    if op == "feed_setup":
        return FeedSetupRequest(rid, req.get("setup"), req.get("function"), req.get("teardown"), req.get("group_keys"))
    raise ValueError(f"materializer helper: unknown op {op!r}")


# ---- answers -----------------------------------------------------------------


def versions_answer(rid, versions, worker_plugins):
    return dumps(
        {
            "id": rid,
            "status": "OK",
            "done": True,
            "versions": versions,
            "worker_plugins": worker_plugins,
            "wire": WIRE_VERSION,
        }
    )


def graph_chunk(rid, objects, tasks, expected, final=None):
    """One chunk of a materialize answer; final (the last chunk's fields:
    culled, explicit_culling, ordered, check_order) makes it the last."""
    msg = {"id": rid, "status": "OK", "done": final is not None, "objects": objects, "tasks": tasks,
           "expected": expected}
    return dumps({**msg, **(final or {})})


def shuffle_run_answer(rid, run_spec, worker_for, workers):
    return dumps(
        {
            "id": rid,
            "status": "OK",
            "done": True,
            "run_spec": run_spec,
            "worker_for": worker_for,
            "workers": workers,
        }
    )


def feed_setup_answer(rid, fields):
    """fields: the kind and, for a progress bar's feed, what its setup
    closure holds (see feed_setup above)."""
    return dumps({"id": rid, "status": "OK", "done": True, **fields})


def error_answer(rid, error_message_fields):
    """error_message_fields: distributed.core.error_message(e)."""
    msg = dict(error_message_fields)
    msg.pop("status", None)
    return dumps({"id": rid, "status": "error", "done": True, **msg})
