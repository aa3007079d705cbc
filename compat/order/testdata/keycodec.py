"""Dask keys as JSON that Go rebuilds into the exact protocol.Key.

str -> {"s": text}; int -> {"i": "decimal"} (a string: JSON numbers lose
precision); float -> {"f": "16 hex digits of the IEEE-754 bits"} (bit exact,
keeps -0.0 and inf); tuple -> {"t": [items...]}. bool is rejected (dask does
not allow it as a key part).
"""

import struct


def encode_key(k):
    if isinstance(k, bool):
        raise TypeError(f"bool is not a dask key part: {k!r}")
    if isinstance(k, str):
        return {"s": k}
    if isinstance(k, int):
        return {"i": str(k)}
    if isinstance(k, float):
        return {"f": struct.pack(">d", k).hex()}
    if isinstance(k, tuple):
        return {"t": [encode_key(x) for x in k]}
    raise TypeError(f"not a dask key: {k!r}")
