"""Task functions of the many-workers benchmark. The hosted workers import
this module (scripts/bench is on their PYTHONPATH, procs.python_env), so the
client pickles the functions by reference."""

from __future__ import annotations

import time


def inc(x: int) -> int:
    return x + 1


def sleep_where(seconds: float) -> str:
    """Sleeps, then says which worker ran it."""
    from distributed import get_worker

    time.sleep(seconds)
    return get_worker().address
