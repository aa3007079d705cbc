"""Small computations under load, with stock Clients and workers:
one client's flood of tiny graphs does not starve another client's round
trips, and a materializer helper stalled on one client's graph does not
hold another client's submit behind it (compat/helper_pool.go)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from distributed import Client

from cluster import PyScheduler, python_env, running_cluster, stop

pytestmark = pytest.mark.timeout(300)

FLOOD = """
import sys
from distributed import Client
def inc(x):
    return x + 1
c = Client(sys.argv[1], timeout=60)
futs = [c.submit(inc, i, pure=False) for i in range(int(sys.argv[2]))]
print("submitted", flush=True)
assert c.gather(futs) == [i + 1 for i in range(int(sys.argv[2]))]
print("done", flush=True)
"""

STALLING_CLIENT = """
import os, sys, time
from distributed import Client

class SlowToUnpickle:
    # unpickled by the scheduler's helper when the graph arrives; waits
    # there until the test creates the release file
    def __init__(self, release):
        self.release = release
    def __reduce__(self):
        return (wait_then, (self.release,))

def wait_then(release):
    while not os.path.exists(release):
        time.sleep(0.01)
    return 7

c = Client(sys.argv[1], timeout=60)
fut = c.submit(lambda x: x, SlowToUnpickle(sys.argv[2]), pure=False)
print("submitted", flush=True)
print("result", fut.result(timeout=120), flush=True)
"""


def inc(x):
    return x + 1


def two_workers(sched, workers):
    """w1 and w2, two threads each: both clusters' workers."""
    workers.start(sched.address, "w1", nthreads=2, env={"PYTHONPATH": str(Path(__file__).parent)})
    workers.start(sched.address, "w2", nthreads=2, env={"PYTHONPATH": str(Path(__file__).parent)})


@pytest.fixture(scope="module")
def go_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("latency")
    with running_cluster(tmp, two_workers, 2) as sched:
        yield sched


# The Client's stream to the scheduler is a BatchedSend with a 10 ms interval
# (Client._ensure_connected): a message sent within 10 ms of the last one
# (the previous submit, or the release of its future) waits for the interval
# to pass. Back-to-back round trips therefore all take about 10 ms whatever
# the scheduler does, and "3x idle" compared 10 ms with 30 ms: a scheduler
# three times slower than idle stayed hidden under the floor. A pause longer
# than the interval before each call lets the submit leave at once, so the
# time measured is the round trip itself, the scheduler's share included.
CLIENT_BATCH_INTERVAL = 0.010
PAUSE = 0.025


def round_trips(c: Client, n: int, base: int) -> list[float]:
    out = []
    for i in range(n):
        time.sleep(PAUSE)  # the previous call's messages (its release too) are out
        t0 = time.perf_counter()
        assert c.submit(inc, base + i, pure=False).result(timeout=60) == base + i + 1
        out.append(time.perf_counter() - t0)
    return out


def flood_round_trips(address: str) -> tuple[list[float], list[float]]:
    """Client B's idle round trips on the cluster at address, then its
    round trips while client A (another process) submits 1,000 tiny graphs
    as fast as it can."""
    with Client(address, timeout=30) as b:
        round_trips(b, 10, 0)  # warm-up
        idle = round_trips(b, 30, 100)
        flood = subprocess.Popen([sys.executable, "-c", FLOOD, address, "1000"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=python_env())
        try:
            assert flood.stdout.readline().strip() == "submitted", flood.stderr.read()[-2000:]
            loaded = []
            while flood.poll() is None and len(loaded) < 200:
                loaded += round_trips(b, 5, 1000 + len(loaded))
            out, err = flood.communicate(timeout=240)
            assert flood.returncode == 0 and "done" in out, err[-2000:]
        finally:
            stop(flood)
    assert len(loaded) >= 5, "the flood ended before client B could measure anything under it"
    return idle, loaded


@pytest.fixture(scope="module")
def py_cluster(tmp_path_factory):
    """Stock `dask scheduler` with the same two workers: the reference."""
    tmp = tmp_path_factory.mktemp("latency-py")
    with running_cluster(tmp, two_workers, 2, scheduler=PyScheduler) as sched:
        yield sched


def test_flood_of_tiny_graphs_does_not_starve_another_client(go_cluster, py_cluster):
    """Client B's submit().result() while client A (another process)
    submits 1,000 tiny graphs as fast as it can: B's median round trip stays
    under 3x its idle median, or (on a machine the flood's own processes
    load beyond that) within 1.5x of distributed's scheduler under the same
    flood, measured ours, distributed's, distributed's, ours and pooled.
    Each of B's calls is paced (round_trips), so neither median is the
    client's 10 ms send interval: the comparison sees the round trip.

    Paced, on 2 shared cores, both schedulers went from about 4-6 ms idle to
    14-37 ms under the flood: the flood client, two busy workers and the
    graph helper share the cores with B. A scheduler that put B behind A's
    queued graphs would show hundreds of milliseconds."""
    # ours, distributed's, distributed's, ours: a load on the machine that
    # rises or falls during the test weighs on both alike
    runs = {"ours": ([], []), "theirs": ([], [])}
    for who in ("ours", "theirs", "theirs", "ours"):
        idle_part, loaded_part = flood_round_trips((go_cluster if who == "ours" else py_cluster).address)
        runs[who][0].extend(idle_part)
        runs[who][1].extend(loaded_part)
    (idle_trips, loaded), (py_idle_trips, py_loaded) = runs["ours"], runs["theirs"]
    idle, py_idle = statistics.median(idle_trips), statistics.median(py_idle_trips)
    med, py_med = statistics.median(loaded), statistics.median(py_loaded)
    print(f"client B on ours: idle median {idle * 1e3:.1f} ms; under the flood median {med * 1e3:.1f} ms, "
          f"max {max(loaded) * 1e3:.1f} ms over {len(loaded)} round trips; on distributed's: idle "
          f"{py_idle * 1e3:.1f} ms, under the flood {py_med * 1e3:.1f} ms over {len(py_loaded)}")
    # The pacing works: idle round trips are not pinned at the client's
    # send interval (the median was 10.5 ms back to back, 3.5-5 ms paced;
    # the fastest, robust to a loaded machine, is what shows it).
    assert min(idle_trips) < CLIENT_BATCH_INTERVAL * 0.9, (
        f"fastest idle round trip {min(idle_trips) * 1e3:.1f} ms: the round trips are still held by the client's "
        f"{CLIENT_BATCH_INTERVAL * 1e3:.0f} ms send interval, so the comparison cannot see the scheduler")
    # 1.5x: pooled, ours ran at 0.43x-1.32x of distributed's in 5 runs at a
    # load of 5-9 on 2 cores; a scheduler that held B behind A's graphs
    # would be 5-10x
    assert med < 3 * idle or med <= 1.5 * py_med, (
        f"under the flood B's median round trip {med * 1e3:.1f} ms >= 3x idle {idle * 1e3:.1f} ms "
        f"and > 1.5x distributed's scheduler's under the same flood ({py_med * 1e3:.1f} ms)")


def test_stalled_helper_does_not_hold_another_clients_submit(go_cluster, tmp_path):
    """Client A's graph stalls the materializer helper (an argument that
    takes until the test releases it to unpickle); client B's plain submit
    completes meanwhile, and A's completes once released."""
    release = tmp_path / "release"
    stalling = subprocess.Popen([sys.executable, "-c", STALLING_CLIENT, go_cluster.address, str(release)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=python_env())
    try:
        assert stalling.stdout.readline().strip() == "submitted", stalling.stderr.read()[-2000:]
        time.sleep(0.5)  # A's graph is in the helper
        with Client(go_cluster.address, timeout=30) as b:
            t0 = time.perf_counter()
            assert b.submit(inc, 1, pure=False).result(timeout=60) == 2
            waited = time.perf_counter() - t0
            assert not release.exists()
            assert stalling.poll() is None, "client A finished although its graph was still stalled"
        release.touch()
        out, err = stalling.communicate(timeout=120)
        assert stalling.returncode == 0 and "result 7" in out, err[-2000:]
    finally:
        release.touch()  # never leave a helper stalled for the tests after this one
        stop(stalling)
    print(f"client B's submit took {waited:.2f} s while A's graph stalled the first helper")


def test_numpy_scalars_in_keys(go_cluster):
    """dask.array's diagonal makes keys with numpy ints inside
    (('ones_like-...', np.int64(0), np.int64(0))); the graph computes."""
    import dask.array as da

    with Client(go_cluster.address, timeout=30) as c:
        x = da.ones((8, 8), chunks=(4, 4))
        d = da.diagonal(da.ones((8, 8), chunks=(4, 4)))
        got = (d + x).compute()
        np.testing.assert_array_equal(got, np.full((8, 8), 2.0))
