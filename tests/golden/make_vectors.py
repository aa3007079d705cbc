"""Record golden wire vectors from the installed dask/distributed.

Run with the project virtualenv (writes protocol/testdata/golden/):

    /work/main/.venv/bin/python tests/golden/make_vectors.py

Each vector NAME is a real message as distributed's TCP comm would put it on
the wire: ``NAME.bin`` holds the exact bytes (the u64 first-read size N, the
prelude and the frames, built by ``distributed.protocol.dumps`` and
``distributed.comm.tcp._add_frames_header``, i.e. what ``TCP.write`` sends), and
``NAME.json`` describes the value frame 0 decodes to, in a typed form the Go
test compares against (see ``describe``). The description is made by decoding
frame 0 with plain ``msgpack`` and the same marker rules as
``distributed.protocol.core.loads``, not by our Go code.

``build_vectors()`` is deterministic (fixed seeds, no uuids) so that
tests/test_golden.py can rebuild the original Python objects and compare them
with what distributed reads back from Go's re-encoding.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import operator
import os
import pathlib
import struct
import sys

import msgpack
import numpy as np
from dask._task_spec import Task, TaskRef

from distributed.comm.tcp import _add_frames_header
from distributed.core import Status
from distributed.protocol import Serialize, ToPickle, dumps
from distributed.protocol.compression import decompress

serialize_mod = importlib.import_module("distributed.protocol.serialize")

OUT = pathlib.Path(__file__).resolve().parents[2] / "protocol" / "testdata" / "golden"
SPLIT = 4096  # shard size for split vectors (distributed's default is 64 MiB)
# distributed.comm.shard as TCP.write would use it when set to "1 MiB".
SHARD_1MIB = 1 << 20


def _rng(seed):
    return np.random.default_rng(seed)


def compute_task(i, key, deps):
    """A compute-task op with exactly the fields the worker accepts (§3.4)."""
    return {
        "op": "compute-task",
        "key": key,
        "priority": (0, 1, -i),
        "duration": 0.5,
        "stimulus_id": f"update-graph-{i}",
        "who_has": {d: ("tcp://127.0.0.1:40001",) for d in deps},
        "nbytes": {d: 800 + i for d in deps},
        "run_spec": ToPickle(Task(key, operator.add, *[TaskRef(d) for d in deps], i)),
        "resource_restrictions": {},
        "actor": False,
        "annotations": {},
        "span_id": None,
        "run_id": i,
    }


def task_finished(i):
    return {
        "op": "task-finished",
        "key": ("inc-5b2c", i),
        "run_id": i,
        "nbytes": 28,
        "type": b"\x80\x05\x95\x14\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x03int\x94\x93\x94.",
        "typename": "int",
        "metadata": {},
        "thread": 140245337904832,
        "startstops": ({"action": "compute", "start": 1.7e9 + i, "stop": 1.7e9 + i + 0.25},),
        "status": "OK",
        "stimulus_id": f"task-finished-{1.7e9 + i}",
    }


def update_graph(i):
    return {
        "op": "update-graph",
        "expr_ser": Serialize({"layer": f"sum-{i}", "deps": [("x", j) for j in range(3)]}),
        "keys": {f"sum-{i}", ("x", i)},
        "span_metadata": ToPickle({"collections": [{"type": "dask.array.Array"}]}),
        "annotations": ToPickle({"retries": {("x", i): 2}}),
        "code": ToPickle(("def f(x):\n    return x\n",)),
        "stimulus_id": f"update-graph-{i}",
        "user_priority": 0,
        "actors": None,
        "fifo_timeout": "100 ms",
    }


def heartbeat():
    return {
        "op": "heartbeat_worker",
        "address": "tcp://127.0.0.1:40001",
        "now": 1767225600.125,
        "metrics": {
            "task_counts": {"memory": 3, "executing": 1},
            "bandwidth": {"total": 100000000, "workers": {}, "types": {}},
            "digests_total_since_heartbeat": {
                ("execute", "inc", "thread-cpu", "seconds"): 0.00125,
                ("execute", "inc", "thread-noncpu", "seconds"): 2.5e-05,
                "latency": 0.0011,
            },
            "managed_bytes": 2400,
            "spilled_bytes": {"memory": 0, "disk": 0},
            "event_loop_interval": 0.02,
            "cpu": 4.0,
            "memory": 123456789,
            "time": 1767225600.0,
            "num_fds": 27,
        },
        "executing": {("x", 1): 0.5, "y": 1.25},
        "extensions": {"spans": {("span-id", "x", 1, 2.5, ("n",)): 1.5}, "shuffle": {}},
        "reply": True,
    }


def build_vectors():
    """Return [(name, msg, dumps kwargs)] in a fixed order."""
    r = _rng(42)
    arr_f = np.arange(2000, dtype="float64")  # 16 000 bytes
    zeros = np.zeros(4000, dtype="int64")  # 32 000 compressible bytes
    rnd = r.integers(0, 256, 10_000, dtype="uint8").tobytes()
    lz = {"context": {"compression": "lz4"}}
    v = [
        ("handshake", {"compression": None, "python": (3, 11, 2), "pickle-protocol": 5}, {}),
        ("identity_request", {"op": "identity", "n_workers": 0, "reply": True}, {}),
        ("identity_reply", {
            "type": "Scheduler", "id": "Scheduler-0b8f", "address": "tcp://127.0.0.1:8786",
            "services": {"dashboard": 8787}, "started": 1767225600.5, "n_workers": 2,
            "total_threads": 4, "total_memory": 25275990016, "workers": {}}, {}),
        ("gather_request", {"op": "gather", "keys": (("x", 0), "y", 3, 1.5), "reply": True}, {}),
        ("gather_reply", {"status": "OK", "data": {
            "inc-1": Serialize(123),
            ("x", 0): Serialize(np.arange(10)),
            "b": Serialize(b"payload"),
            ("d", 1): Serialize({"a": np.arange(5), "b": [1, 2]}),
        }}, {}),
        ("gather_error", {"status": "error", "keys": (("x", 0), "y")}, {}),
        ("heartbeat_worker", heartbeat(), {}),
        ("heartbeat_reply", {"status": "OK", "time": 1767225600.25, "heartbeat-interval": 0.5}, {}),
        ("register_worker_reply", {
            "status": "OK", "time": 1767225600.0, "heartbeat-interval": 0.5,
            "worker-plugins": {"shuffle": b"\x80\x05\x95\x10\x00plugin"}, "warning": "", "error": ""}, {}),
        ("uncaught_error", {
            "status": "uncaught-error", "exception": Serialize(ValueError("boom", 3)),
            "traceback": None, "exception_text": "ValueError('boom', 3)", "traceback_text": ""}, {}),
        ("reply_none", None, {}),
        ("reply_ok", "OK", {}),
        ("reply_true", True, {}),
        ("reply_keys", (("x", 0), ("x", 1), "y"), {}),
        ("stream_start", [{"op": "stream-start", "warning": "", "error": ""}], {}),
        ("batch_compute_task", [
            compute_task(0, ("x-4a1b", 0, 1), []),
            compute_task(1, ("sum-9c", 1), [("x-4a1b", 0, 1), ("x-4a1b", 1, 1)]),
            compute_task(2, "finalize-77", [("sum-9c", 1)]),
        ], {}),
        ("batch_task_finished", [task_finished(i) for i in range(5)], {}),
        ("batch_update_graph", [update_graph(i) for i in range(3)], {}),
        ("batch_mixed_stream", [
            {"op": "task-finished", "key": "a", "run_id": 7, "nbytes": 8, "status": "OK"},
            {"op": "add-keys", "keys": ("a", ("b", 1)), "stimulus_id": "s"},
            {"op": "keep-alive"},
            {"op": "release-worker-data", "key": ("b", 1), "stimulus_id": "r"},
            {"op": "close-stream"},
        ], {}),
        ("pickled_oob", {"op": "x", "obj": ToPickle(np.arange(1000, dtype="int32"))}, {}),
        ("serialized_oob_pickle", {"data": Serialize({"k": np.arange(300), "s": "text"})},
         {"serializers": ["pickle"]}),
        ("serialized_numpy", {"data": Serialize(arr_f.reshape(40, 50))}, {}),
        ("serialized_msgpack", {"data": Serialize({"a": [1, 2.5, "x"], "b": b"raw"})},
         {"serializers": ["msgpack"]}),
        ("serialized_empty_bytes", {"data": Serialize(b""), "more": Serialize(b"x" * 3)}, {}),
        ("compressed_serialized", {"data": Serialize(zeros)}, lz),
        ("compressed_pickled", {"op": "p", "obj": ToPickle(zeros.copy())}, lz),
        ("compressed_mixed", {"a": Serialize(zeros), "rnd": Serialize(rnd), "b": ToPickle(b"y" * 20000)}, lz),
        ("split_bytes", {"data": Serialize(rnd)}, {"frame_split_size": SPLIT}),
        ("split_numpy", {"data": Serialize(arr_f)}, {"frame_split_size": SPLIT}),
        ("split_compressed", {"data": Serialize(np.zeros(8000, dtype="int64"))},
         {"frame_split_size": 16384, **lz}),
        ("split_shard_1mib", {"data": Serialize(np.zeros(SHARD_1MIB // 8 + 512, dtype="int64"))},
         {"frame_split_size": SHARD_1MIB, **lz}),
        ("keys_all_kinds", {"op": "client-releases-keys", "client": "Client-1", "keys": (
            "a", 1, -7, 2.5, ("x", 0), ("x", (1, 2)), ("y", 1.5, ("z", ("w", 0))), ("t",))}, {}),
        ("key_maps", {"who_has": {("x", 0): ("tcp://a:1", "tcp://b:2"), 3: (), 2.5: ("tcp://c:3",),
                                  "s": ()},
                      "nbytes": {("x", 0): 80, 3: 8, 2.5: 8, "s": 49}}, {}),
        ("bytes_vs_str", {"s": "text", "b": b"text", "es": "", "eb": b"", "u": "日本語 ✓",
                          b"binkey": "bin map key", "t": ("text", b"text")}, {}),
        ("sets", {"op": "cancelled-keys", "keys": {"a"}, "empty": set(), "tuples": {("x", 1)},
                  "nested": ({"inner"},)}, {}),
        ("nested_tuples", {"deep": ((((((((("bottom",),),),),),),),),), "mix": (1, (2, (3, [4, {"k": (5,)}])))}, {}),
        ("scalars", {"none": None, "t": True, "f": False, "zero": 0, "neg": -1, "neg32": -33,
                     "neg8": -128, "neg16": -32769, "min64": -(2**63), "u8": 255, "u16": 65535,
                     "u32": 2**32 - 1, "i33": 2**32, "maxint64": 2**63 - 1, "big": 2**63,
                     "maxu64": 2**64 - 1}, {}),
        ("floats", {"zero": 0.0, "negzero": -0.0, "half": 1.5, "big": 1e300, "tiny": 5e-324,
                    "inf": float("inf"), "ninf": float("-inf"), "third": 1 / 3, "int_like": 3.0}, {}),
        ("sizes", {
            "s31": "a" * 31, "s32": "b" * 32, "s255": "c" * 255, "s256": "d" * 256,
            "s65535": "e" * 65535, "s65536": "f" * 65536,
            "b255": b"\x01" * 255, "b256": b"\x02" * 256, "b65536": b"\x03" * 65536,
            "a15": tuple(range(15)), "a16": tuple(range(16)), "a65536": (0,) * 65536,
            "m15": {f"k{i}": i for i in range(15)}, "m16": {f"k{i}": i for i in range(16)},
        }, {}),
        ("int_map_keys", {1: "one", -1: "minus one", 2**40: "big", (1, "a"): {"nested": {0: None}}}, {}),
        ("two_arrays_gulp", {"op": "update_data", "data": {
            "a": Serialize(np.arange(3000, dtype="float64")),
            "b": Serialize(np.ones(3000, dtype="float64"))}}, {}),
        # Maps Python's loads leaves alone, plus an __Enum__ that Go must relay.
        ("marker_lookalikes", {"__Pickled__": 0, "x": 1, "nested": {"__Pickled__": -2},
                               "status": Status.running, "Serialized": "__Serialized__"}, {}),
    ]
    return v


# --- description of the decoded value, independent of the Go code ---------

class Pairs:
    """A msgpack map as decoded, keeping order and non-hashable-safe pairs."""

    def __init__(self, pairs):
        self.pairs = list(pairs)

    def get(self, name, default=None):
        for k, val in self.pairs:
            if isinstance(k, str) and k == name:
                return val
        return default


def describe(x, frames):
    """Typed JSON of a value decoded from frame 0 (see protocol/golden_test.go)."""
    if x is None:
        return {"t": "nil"}
    if isinstance(x, bool):
        return {"t": "bool", "v": x}
    if isinstance(x, int):
        return {"t": "int", "v": str(x)}
    if isinstance(x, float):
        return {"t": "float", "v": x.hex()}
    if isinstance(x, str):
        return {"t": "str", "v": x}
    if isinstance(x, bytes):
        return {"t": "bin", "v": base64.b64encode(x).decode()}
    if isinstance(x, tuple):
        items = [describe(e, frames) for e in x]
        if len(items) > 16 and all(i == items[0] for i in items):
            # Run-length form keeps the 65 536-element array's description small.
            return {"t": "arr", "rep": len(items), "v": items[:1]}
        return {"t": "arr", "v": items}
    assert isinstance(x, Pairs), type(x)
    # Same rules, same order as distributed.protocol.core.loads._decode_default
    # and serialize.msgpack_decode_default (no __Enum__ in our vectors).
    for marker, pickled in (("__Serialized__", False), ("__Pickled__", True)):
        off = x.get(marker, 0)
        if isinstance(off, int) and off > 0:
            sub = msgpack.loads(frames[off], strict_map_key=False)
            n = sub["num-sub-frames"]
            payload = list(frames[off + 1 : off + 1 + n])
            if "compression" in sub:
                payload = decompress(sub, payload)
            d = {"t": "blob", "pickled": pickled, "offset": off, "n": n, "payload_sha256": _sha(payload)}
            if not pickled:
                d["merged_sha256"] = _sha(merged_frames(sub, payload))
            return d
    if any(isinstance(k, str) and k == "__Set__" for k, _ in x.pairs):
        return {"t": "set", "v": [describe(e, frames) for e in x.get("as-list")]}
    return {"t": "map", "v": [[describe(k, frames), describe(val, frames)] for k, val in x.pairs]}


def _sha(frames):
    return [hashlib.sha256(memoryview(f).cast("B")).hexdigest() for f in frames]


def merged_frames(sub_header, frames):
    """The frames distributed's merge_and_deserialize hands to deserialize()."""
    seen = []

    def capture(header, merged, deserializers=None):
        seen.extend(merged)

    orig = serialize_mod.deserialize
    serialize_mod.deserialize = capture
    try:
        serialize_mod.merge_and_deserialize(sub_header, frames)
    finally:
        serialize_mod.deserialize = orig
    return seen


def wire_bytes(frames):
    """Exactly what distributed.comm.tcp.TCP.write puts on the socket."""
    framed, _, _ = _add_frames_header(list(frames))
    return b"".join(bytes(f) for f in framed)


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":
        # Set iteration order (the "keys" sets) depends on str hashing: pin it
        # so that regenerating the vectors gives the same bytes.
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*"):
        old.unlink()
    total = 0
    for name, msg, kwargs in build_vectors():
        # TCP.write always passes the negotiated compression (None by default);
        # without it dumps() would fall back to "auto", i.e. lz4.
        kwargs = {"context": {"compression": None}, **kwargs}
        frames = dumps(msg, **kwargs)
        data = wire_bytes(frames)
        decoded = msgpack.loads(frames[0], raw=False, use_list=False, strict_map_key=False,
                                object_pairs_hook=Pairs)
        (first_read,) = struct.unpack_from("<Q", data)
        desc = {
            "name": name,
            "frames": len(frames),
            "frame_lengths": [len(memoryview(f).cast("B")) for f in frames],
            "first_read": first_read,
            "split_size": kwargs.get("frame_split_size", 0),
            "value": describe(decoded, frames),
        }
        (OUT / f"{name}.bin").write_bytes(data)
        (OUT / f"{name}.json").write_text(json.dumps(desc, separators=(",", ":"), sort_keys=True) + "\n")
        total += len(data)
    print(f"wrote {len(build_vectors())} vectors, {total} wire bytes, to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
