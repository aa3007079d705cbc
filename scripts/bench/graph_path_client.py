"""The client side of one graph-path run (scripts/bench/graph_path.py),
in a process of its own so that its task functions live in __main__, as in
a user's script or notebook: cloudpickle pickles them by value, and the
scheduler side must not pay for that once per task.

    graph_path_client.py CASE --scheduler-file F [--size N]

Protocol with the harness, on stdout: "START" right before the timed part
begins, then "DONE <json>" when it ends; the harness reads the scheduler's
CPU at both lines. The client then waits for stdin to close before it
cancels what is left and exits, so that the clean-up is outside the window.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time


def inc(x):
    return x + 1


def add(x, y):
    return x + y


def tree(n_leaves: int, leaf_func, prefix: str) -> tuple[dict, tuple]:
    """A binary tree of add over n_leaves leaves leaf_func(i): about
    2 * n_leaves tasks. Returns (graph, root key)."""
    dsk: dict = {(f"{prefix}-leaf", i): (leaf_func, i) for i in range(n_leaves)}
    level = [(f"{prefix}-leaf", i) for i in range(n_leaves)]
    depth = 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level), 2):
            key = (f"{prefix}-add-{depth}", j // 2)
            pair = level[j:j + 2]
            dsk[key] = (add, *pair) if len(pair) == 2 else (inc, pair[0])
            nxt.append(key)
        level, depth = nxt, depth + 1
    return dsk, level[0]


def expected_tree(n_leaves: int) -> int:
    """The root of tree(n, inc): every leaf i becomes i + 1, and each odd one
    out at a level is incremented once more on its way up."""
    level = [i + 1 for i in range(n_leaves)]
    while len(level) > 1:
        level = [sum(level[j:j + 2]) if j + 1 < len(level) else level[j] + 1 for j in range(0, len(level), 2)]
    return level[0]


def say(line: str) -> None:
    print(line, flush=True)


def run(case: str, client, size: int) -> dict:
    from distributed import wait

    if case in ("tree-200k", "tree-1m"):
        # submit a big graph, then a high-priority sentinel: its result comes
        # back once the scheduler side has taken the whole graph in
        dsk, root = tree(size, inc, "big")
        say("START")
        t0 = time.perf_counter()
        future = client.get(dsk, root, sync=False)
        submitted = time.perf_counter() - t0
        del dsk
        sentinel = client.submit(inc, -1, priority=1000, pure=False, key="sentinel")
        value = sentinel.result(timeout=3600)
        wall = time.perf_counter() - t0
        run.keep = future  # released after the window
        return {"wall_s": wall, "client_submit_s": submitted, "ok": value == 0,
                "error": None if value == 0 else f"sentinel {value!r}"}
    if case in ("map-20k", "map-20k-progress"):
        say("START")
        t0 = time.perf_counter()
        futures = client.map(inc, range(size))
        if case == "map-20k-progress":
            from distributed import progress

            with contextlib.redirect_stdout(sys.stderr):  # stdout carries START / DONE
                progress(futures, notebook=False)
        results = client.gather(futures)
        wall = time.perf_counter() - t0
        want = size * (size + 1) // 2
        ok = sum(results) == want
        return {"wall_s": wall, "ok": ok, "error": None if ok else f"sum {sum(results)}, expected {want}"}
    if case == "tree-40k":
        dsk, root = tree(size, inc, "sum")
        say("START")
        t0 = time.perf_counter()
        value = client.get(dsk, root)
        wall = time.perf_counter() - t0
        want = expected_tree(size)
        return {"wall_s": wall, "ok": value == want, "error": None if value == want else f"{value} != {want}"}
    raise SystemExit(f"unknown case {case!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--scheduler-file", required=True)
    ap.add_argument("--size", type=int, required=True, help="leaves of a tree, or tasks of the map")
    args = ap.parse_args()
    from distributed import Client

    with Client(scheduler_file=args.scheduler_file, timeout=60) as client:
        client.wait_for_workers(1, timeout=60)
        rec = run(args.case, client, args.size)
        say("DONE " + json.dumps(rec))
        sys.stdin.read()  # the harness closes it once it has read the counters
        run.keep = None


if __name__ == "__main__":
    main()
