"""Task functions and graphs of the stress cases. Workers and the
materializer helper import this module (tests/stress is on their
PYTHONPATH), as a user's own modules are importable where their tasks run."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def slow_inc(x, delay=0.05):
    time.sleep(delay)
    return x + 1


def total(*xs):
    return sum(xs)


def tree(n_leaves: int, prefix: str) -> tuple[dict, tuple, int]:
    """A binary sum tree over int(i) leaves (the benchmarks' tree_graph):
    (graph, root key, exact sum). Client side only."""
    bench = str(Path(__file__).resolve().parents[2] / "scripts" / "bench")
    if bench not in sys.path:
        sys.path.append(bench)
    from overhead import tree_graph

    dsk, root = tree_graph(2 * n_leaves, prefix)
    return dsk, root, n_leaves * (n_leaves - 1) // 2


def slow_graph(n: int, prefix: str, delay: float) -> tuple[dict, str, int]:
    """n slow increments and one sum over them: (graph, root, exact sum)."""
    dsk: dict = {(f"{prefix}-inc", i): (slow_inc, i, delay) for i in range(n)}
    dsk[f"{prefix}-total"] = (total, *[(f"{prefix}-inc", i) for i in range(n)])
    return dsk, f"{prefix}-total", sum(range(1, n + 1))


def restore_slowly(seconds: float, value: int, marker: str | None = None) -> int:
    """Unpickles to value after `seconds`; first, if marker is given,
    appends the line "PID TIME" of the process unpickling it to that file
    (the client unpickles the graph too, before the helper does)."""
    if marker:
        import os

        with open(marker, "a") as f:
            f.write(f"{os.getpid()} {time.time()!r}\n")
    time.sleep(seconds)
    return value


class SlowToUnpickle:
    """Unpickling it takes `seconds`: the materializer helper spends that
    long inside one graph, a window to kill it in. With a marker file, each
    unpickling process records its PID and when it entered that window."""

    def __init__(self, seconds: float, value: int, marker: str | None = None):
        self.seconds, self.value, self.marker = seconds, value, marker

    def __reduce__(self):
        return restore_slowly, (self.seconds, self.value, self.marker)
