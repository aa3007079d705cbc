"""Go -> Python direction of the golden wire vectors.

protocol/golden_test.go proves Go reads what distributed writes. This test
proves the reverse with distributed's own reader: a Go program
(protocol/internal/reencode) decodes every recorded vector and writes it back
with protocol.Encode + WriteFrames, and distributed.comm.tcp.TCP.read - the
stock reader, over a real 127.0.0.1 socket, with deserialize=True (client and
worker) and deserialize=False (scheduler) - must return the original Python
object. It also reads Go-made blobs (NewPickled/NewSerialized, re-split at a
16 KiB shard, lz4-compressed by Go's MaybeCompress) back into the originals.

Needs the project virtualenv (numpy, lz4) and a Go toolchain.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import pathlib
import shutil
import socket
import subprocess
from enum import Enum

import lz4.block
import numpy as np
import pytest
from tornado.iostream import IOStream

from distributed.comm.core import CommClosedError
from distributed.comm.tcp import TCP
from distributed.protocol import Serialize, Serialized, ToPickle
from distributed.protocol.compression import decompress
from distributed.protocol.serialize import merge_and_deserialize
from distributed.protocol.utils import unpack_frames

ROOT = pathlib.Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "protocol" / "testdata" / "golden"

_spec = importlib.util.spec_from_file_location("make_vectors", ROOT / "tests" / "golden" / "make_vectors.py")
make_vectors = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_vectors)
VECTORS = {name: msg for name, msg, _ in make_vectors.build_vectors()}


@pytest.fixture(scope="module")
def go_out(tmp_path_factory):
    """Build the Go re-encoder once and run it over every golden vector."""
    go = shutil.which("go")
    assert go, "the Go toolchain is required for the Go -> Python golden test"
    tmp = tmp_path_factory.mktemp("golden-go")
    exe = tmp / "reencode"
    subprocess.run([go, "build", "-o", str(exe), "./protocol/internal/reencode"], cwd=ROOT, check=True)
    out = tmp / "out"
    subprocess.run([str(exe), str(GOLDEN), str(out)], check=True, timeout=300)
    return out


async def tcp_read(data: bytes, deserialize: bool):
    """Send data over a real TCP socket and read it with distributed's TCP comm."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    csock = socket.create_connection(lsock.getsockname())
    ssock, _ = lsock.accept()
    lsock.close()
    loop = asyncio.get_running_loop()
    try:
        sending = loop.run_in_executor(None, csock.sendall, data)
        ssock.setblocking(False)
        comm = TCP(IOStream(ssock), "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", deserialize=deserialize)
        try:
            # The timeout only guards against a hang; it is not a timing check.
            msg = await asyncio.wait_for(comm.read(), 60)
            await sending
            csock.close()
            # Exactly one message: the next read sees the peer's close.
            with pytest.raises(CommClosedError):
                await asyncio.wait_for(comm.read(), 60)
        finally:
            comm.abort()
    finally:
        csock.close()
    return msg


def expected(x):
    """What loads(deserialize=True) returns for a message containing x."""
    if isinstance(x, (Serialize, ToPickle)):
        return x.data
    if isinstance(x, (list, tuple)):
        return tuple(expected(e) for e in x)
    if isinstance(x, dict):
        return {k: expected(v) for k, v in x.items()}
    return x


def materialize(x):
    """Turn the Serialized objects of a deserialize=False read into values."""
    if isinstance(x, Serialized):
        frames = x.frames
        if "compression" in x.header:
            frames = decompress(x.header, frames)
        return merge_and_deserialize(x.header, frames)
    if isinstance(x, tuple):
        return tuple(materialize(e) for e in x)
    if isinstance(x, dict):
        return {k: materialize(v) for k, v in x.items()}
    return x


def same(a, b, path="msg"):
    """Deep equality that handles numpy, exceptions, NaN and bytes-likes."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), path
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), path
        return
    if isinstance(a, BaseException):
        assert type(a) is type(b) and a.args == b.args, path
        return
    if isinstance(a, (bytes, bytearray, memoryview)):
        assert isinstance(b, (bytes, bytearray, memoryview)) and bytes(a) == bytes(b), path
        return
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{path}: {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
        return
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{path}: keys {list(b)} != {list(a)}"
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
        return
    if isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), path
        return
    if isinstance(a, float):
        assert type(b) is float and math.copysign(1, a) == math.copysign(1, b), path
    if not isinstance(a, Enum):
        assert type(a) is type(b), f"{path}: {type(b)} is not {type(a)}"
    assert a == b, f"{path}: {b!r} != {a!r}"


def python_frames(data: bytes):
    return [bytes(f) for f in unpack_frames(data[8:])]


def test_vectors_are_current():
    names = sorted(p.stem for p in GOLDEN.glob("*.bin"))
    assert len(names) >= 30
    assert names == sorted(VECTORS), "re-run tests/golden/make_vectors.py"


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_go_relay_read_by_distributed(go_out, name):
    original = VECTORS[name]
    want = expected(original)
    py_wire = (GOLDEN / f"{name}.bin").read_bytes()
    go_wire = (go_out / f"{name}.bin").read_bytes()

    # The recorded bytes still decode to the builder's object.
    same(want, asyncio.run(tcp_read(py_wire, deserialize=True)))
    # Go relays every frame byte for byte; only N may differ.
    assert python_frames(go_wire) == python_frames(py_wire)
    # distributed reads Go's bytes as a client/worker and as a scheduler does.
    same(want, asyncio.run(tcp_read(go_wire, deserialize=True)))
    same(want, materialize(asyncio.run(tcp_read(go_wire, deserialize=False))))


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_go_made_blobs_read_by_distributed(go_out, name):
    path = go_out / f"{name}.gomade.bin"
    if not path.exists():
        # Only messages that carry blobs get a Go-made twin: this one has none.
        assert len(python_frames((GOLDEN / f"{name}.bin").read_bytes())) == 1
        return
    want = expected(VECTORS[name])
    same(want, asyncio.run(tcp_read(path.read_bytes(), deserialize=True)))
    same(want, materialize(asyncio.run(tcp_read(path.read_bytes(), deserialize=False))))


def test_go_lz4_frames_decompress_with_python_lz4(go_out):
    """Every sub-frame Go marked "lz4" is a python-lz4 block (size-prefixed)."""
    import msgpack

    count = 0
    for path in sorted(go_out.glob("*.gomade.bin")):
        frames = python_frames(path.read_bytes())
        offsets = []

        def hook(d):
            off = d.get("__Serialized__", 0) or d.get("__Pickled__", 0)
            if isinstance(off, int) and off > 0:
                offsets.append(off)
            return d

        msgpack.loads(frames[0], object_hook=hook, strict_map_key=False, use_list=False)
        for i in offsets:
            sub = msgpack.loads(frames[i], strict_map_key=False)
            for j, codec in enumerate(sub.get("compression") or ()):
                if codec == "lz4":
                    raw = lz4.block.decompress(frames[i + 1 + j])
                    assert len(raw) > len(frames[i + 1 + j]) >= 4
                    count += 1
    assert count >= 4, f"only {count} Go-compressed sub-frames found"
