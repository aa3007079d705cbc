"""Peers that stop reading, with stock processes: 20 of 50 stock workers
SIGSTOPped just before a computation (their sockets fill with the tasks sent
to them) and in the middle of one, and a client SIGSTOPped during a gather
through the scheduler. scripts/bench/faults.py runs these cases; here they
run against our scheduler with the assertions, and `scripts/bench.sh
--workloads faults` runs the same against Python's for the table
(scripts/bench/results/faults/).

What must hold, as on Python's scheduler:
  - every result exact, the stopped workers removed at worker-ttl and their
    tasks rerun;
  - another client, on a worker never stopped, is served throughout: its
    median round trip within 3x its idle median and, while workers are
    stopped, its worst under 1 s (a scheduler that waits on a stopped peer
    under its lock stalls it for each such peer in turn); during the client
    case its worst is only bounded loosely, at 5 s: moving 1 GiB through
    the scheduler fills both cores of the machine, and that case is about
    the stopped client's connection;
  - the stopped workers, continued, close by themselves (they find their
    stream closed, Worker.handle_scheduler) and do not register again;
  - the stopped client's gather connection is dropped at the TCP timeout
    (distributed.comm.timeouts.tcp), and once continued it gets
    CommClosedError for its gather.

Smoke scale hosts ten workers to a process (SIGSTOP stops a process); full
scale (DASKGO_STRESS=full) runs one process per worker.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cluster import build_binary
from stress import scaled

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "bench"))

import faults  # noqa: E402

SCALE = faults.Scale(per_host=scaled(10, 1), tcp_timeout=scaled("15s", "30s"))
pytestmark = pytest.mark.timeout(scaled(420, 900))


@pytest.mark.parametrize("case", faults.CASES)
def test_a_peer_that_stops_reading_stalls_nobody(case, tmp_path):
    build_binary()
    rec = faults.one_run(case, "go", tmp_path, SCALE, timeout=scaled(180, 300))
    assert rec["ok"], f"{rec.get('error')}\n{rec.get('traceback', '')}"
    idle, median, worst = rec["idle_median_ms"], rec["fault_median_ms"], rec["fault_max_ms"]
    assert rec["probe_errors"] == 0
    assert median <= 3 * idle, f"the other client's median round trip was {median:.1f} ms during the fault, " \
                               f"over 3x its idle {idle:.1f} ms"
    bound = 5000 if case == "client-stop" else 1000
    assert worst < bound, f"the other client waited {worst:.0f} ms once during the fault"
    if case == "client-stop":
        tcp = float(SCALE.tcp_timeout.rstrip("s"))
        assert rec["client_dropped_s"] is not None, \
            f"the stopped client's gather connection was held ({rec.get('client_connections')} connections " \
            f"when stopped, {rec.get('reply_after_s', 0):.1f} s after asking); its log ends:\n" \
            + (tmp_path / "stopped-client.log").read_text(errors="replace")[-2000:]
        assert rec["client_dropped_s"] <= tcp + 15, \
            f"the stopped client's connection was dropped after {rec['client_dropped_s']:.0f} s, not at the {tcp:.0f} s TCP timeout"
        assert rec["client_outcome"] == "error CommClosedError", rec["client_outcome"]
        return
    assert rec["exact"]
    stopped_procs = SCALE.stopped // SCALE.per_host
    assert rec["revived_exited"] == stopped_procs, \
        f"{rec['revived_exited']} of {stopped_procs} continued worker processes closed by themselves"
    assert rec["revived_registered"] == 0, f"{rec['revived_registered']} removed workers registered again"
    # worker-ttl is 8 s; with 51 workers 10 heartbeat intervals (2 s each) make it 20 s
    assert rec["removed_s"] < 20 + scaled(40, 60), f"the stopped workers were removed only after {rec['removed_s']:.0f} s"
