"""Message timestamps from inside a Python dask process, for the round-trip
profile (roundtrip_profile.py): imported (or given as `--preload`) it wraps
distributed's TCP comm so that every message read or written is recorded
with time.time_ns() (a read once decoded, a write when it starts), its direction, the peer and its ops (with their first
key). Records go to $ROUNDTRIP_TRACE_DIR/<role>-<pid>.jsonl, flushed at
exit; the role is $ROUNDTRIP_TRACE_ROLE or "proc".

The Go scheduler writes the same records itself at --log-level trace
(scheduler/server/trace.go), so the two sides line up on one clock.
"""

from __future__ import annotations

import atexit
import json
import os
import time

from distributed.comm.tcp import TCP

_DIR = os.environ.get("ROUNDTRIP_TRACE_DIR", "")
_ROLE = os.environ.get("ROUNDTRIP_TRACE_ROLE", "proc")
_records: list = []


def _key(k) -> str:
    return k if isinstance(k, str) else str(k)


def ops(msg) -> list[str]:
    items = msg if isinstance(msg, (list, tuple)) else [msg]
    out = []
    for it in items[:8]:
        if not isinstance(it, dict):
            out.append(str(it)[:40])
            continue
        name = it.get("op") or (f"status:{it['status']}" if "status" in it else "?")
        if "key" in it:
            name += " " + _key(it["key"])
        elif isinstance(it.get("keys"), (list, set, tuple)) and it["keys"]:
            name += " " + _key(next(iter(it["keys"])))
        out.append(name)
    if len(items) > 8:
        out.append(f"+{len(items) - 8} more")
    return out


def _flush() -> None:
    if _DIR and _records:
        with open(os.path.join(_DIR, f"{_ROLE}-{os.getpid()}.jsonl"), "a") as f:
            for r in _records:
                f.write(json.dumps(r) + "\n")
        _records.clear()


if _DIR and not getattr(TCP, "_roundtrip_traced", False):
    _read, _write = TCP.read, TCP.write

    async def read(self, deserializers=None):
        msg = await _read(self, deserializers)
        _records.append({"ns": time.time_ns(), "dir": "r", "peer": self.peer_address, "ops": ops(msg)})
        return msg

    async def write(self, msg, serializers=None, on_error="message"):
        # the time the write starts: awaiting it may end after the peer read it
        _records.append({"ns": time.time_ns(), "dir": "w", "peer": self.peer_address, "ops": ops(msg)})
        return await _write(self, msg, serializers, on_error)

    TCP.read, TCP.write = read, write
    TCP._roundtrip_traced = True
    atexit.register(_flush)

