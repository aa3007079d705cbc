"""Task functions of the fault cases (faults.py). Workers import this module
(scripts/bench is on their PYTHONPATH, procs.python_env), so the client
pickles the functions by reference."""

from __future__ import annotations

import time


def inc(x: int) -> int:
    return x + 1


def carry(i: int, payload: bytes, seconds: float) -> int:
    """A task whose run_spec carries payload (64 KiB in the fault cases), so
    that the compute-task messages sent to a stopped worker fill its socket."""
    time.sleep(seconds)
    return i + len(payload)


def block(i: int, nbytes: int):
    """nbytes of data held on a worker, for the client-stop case's gather."""
    import numpy as np

    return np.full(nbytes // 8, i, dtype=np.float64)
