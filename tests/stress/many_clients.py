"""One process of the many-clients case: N stock Clients on threads, each
computing a graph of T tasks whose first half has the same keys in every
client (shared) and whose second half is its own, and checking the result
exactly. Prints one JSON line: {"ok": n, "wrong": n, "errors": [...]}.

    python many_clients.py ADDRESS N_CLIENTS TASKS FIRST_CLIENT_ID
"""

from __future__ import annotations

import json
import operator
import sys
import threading


def graph(cid: int, tasks: int) -> tuple[dict, str, int]:
    shared = tasks // 2
    dsk: dict = {("shared-inc", i): (operator.add, i, 1) for i in range(shared)}
    own = tasks - shared - 1
    for i in range(own):
        dsk[(f"own-{cid}", i)] = (operator.mul, ("shared-inc", i % shared), cid)
    root = f"sum-{cid}"
    dsk[root] = (sum, [(f"own-{cid}", i) for i in range(own)])
    expect = sum(((i % shared) + 1) * cid for i in range(own))
    return dsk, root, expect


def one(address: str, cid: int, tasks: int, out: dict, lock: threading.Lock) -> None:
    from distributed import Client

    try:
        with Client(address, timeout=120) as c:
            dsk, root, expect = graph(cid, tasks)
            got = c.get(dsk, root, sync=True)
        with lock:
            out["ok" if got == expect else "wrong"] += 1
    except Exception as e:  # reported, counted as a failure by the test
        with lock:
            out["errors"].append(f"client {cid}: {type(e).__name__}: {e}"[:300])


def main() -> int:
    address, n, tasks, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    out = {"ok": 0, "wrong": 0, "errors": []}
    lock = threading.Lock()
    threads = [threading.Thread(target=one, args=(address, first + i, tasks, out, lock)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
