"""pytest for the simulator's calibration and validation helpers and the
wait trace (no cluster; well under a second): calibrate.worker_speed,
validate.sim_peak and trace_waits.analyse on hand-made traces.

    .venv/bin/python -m pytest tests/test_sim_tools.py
"""

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "sim"))
sys.path.insert(0, str(ROOT / "scripts" / "bench"))

import calibrate  # noqa: E402
import trace_waits  # noqa: E402
import validate  # noqa: E402


def run(path, per_worker):
    """A calibration trace: per worker, (prefix, seconds) tasks."""
    workers = {}
    for i, tasks in enumerate(per_worker):
        t, rows = 0.0, []
        for p, d in tasks:
            rows.append([p, t, t + d, 0, 0, 0])
            t += d
        workers[f"w{i}"] = {"tasks": rows}
    return {"path": path, "workers": workers}


def test_worker_speed_is_the_spread_of_per_worker_factors():
    # two workers per run; in each run one takes 1.2x as long on every task,
    # so the log factors sit at +-log(1.2)/2 about the run's mean
    runs = [run(f"r{n}", [[("a", 0.1)] * 5 + [("b", 0.01)] * 3,
                          [("a", 0.12)] * 5 + [("b", 0.012)] * 3]) for n in range(3)]
    # a prefix whose median is under 1 ms does not count, however its tasks spread
    runs[0]["workers"]["w1"]["tasks"] += [["tiny", 0, 0.0009, 0, 0, 0], ["tiny", 0, 0.05, 0, 0, 0],
                                          ["tiny", 0, 0.0005, 0, 0, 0]]
    got = calibrate.worker_speed(runs)
    half = math.log(1.2) / 2
    # pooled: 3 runs x 2 workers, one degree of freedom per run
    assert got["sigma"] == pytest.approx(math.sqrt(3 * 2 * half * half / 3), rel=1e-3)
    assert got["runs"] == 3
    assert got["factors"]["r1"] == pytest.approx([math.exp(-half), math.exp(half)], abs=1e-3)


def test_sim_peak_reads_the_sampled_peak_on_request():
    rec = {"workload": "w", "mode": "main", "peak_cluster_memory_bytes": 10, "peak_cluster_sampled_bytes": 8}
    assert validate.sim_peak(rec, False) == 10
    assert validate.sim_peak(rec, True) == 8
    old = {"workload": "w", "mode": "main", "peak_cluster_memory_bytes": 10}
    with pytest.raises(SystemExit, match="re-run the sweep"):
        validate.sim_peak(old, True)


def test_analyse_finds_a_consumer_waiting_behind_its_worker():
    # c's inputs m1 (worker A) and m2 (worker B) finish at 1.0 and 1.1; c runs
    # on worker C, fetches both by 1.3, and starts at 3.3: meanwhile C started
    # two roots. d's inputs are local to A.
    ran = {
        "m1": {"worker": "A", "start": 0.5, "stop": 1.0, "transfers": []},
        "m2": {"worker": "B", "start": 0.6, "stop": 1.1, "transfers": []},
        "c": {"worker": "C", "start": 3.3, "stop": 3.4, "transfers": [(1.15, 1.2), (1.2, 1.3)]},
        ("root", 1): {"worker": "C", "start": 1.5, "stop": 2.0, "transfers": []},
        ("root", 2): {"worker": "C", "start": 2.2, "stop": 3.2, "transfers": []},
        "m3": {"worker": "A", "start": 1.0, "stop": 1.2, "transfers": []},
        "m4": {"worker": "A", "start": 1.2, "stop": 1.4, "transfers": []},
        "d": {"worker": "A", "start": 1.45, "stop": 1.5, "transfers": []},
    }
    deps = {"c": ["m1", "m2"], "d": ["m3", "m4"]}
    prefix = {"m1": "merge", "m2": "merge", "m3": "merge", "m4": "merge", "c": "sum", "d": "sum"}
    orig = trace_waits.tp.prefix_of
    trace_waits.tp.prefix_of = lambda k: "root" if isinstance(k, tuple) else prefix[k]
    try:
        a = trace_waits.analyse(ran, deps, "sum", "merge")
    finally:
        trace_waits.tp.prefix_of = orig
    assert a["remote"]["after"]["n"] == 1 and a["remote"]["after"]["max_s"] == pytest.approx(2.0)
    assert a["remote"]["delay"]["max_s"] == pytest.approx(2.2)
    assert a["local"]["delay"]["n"] == 1 and a["local"]["delay"]["max_s"] == pytest.approx(0.05)
    worst = a["longest_after_arrival"][0]
    assert worst["worker"] == "C" and worst["ran_meanwhile"] == {"root": 2}
    assert worst["inputs_computed_on"] == {"merge": ["A", "B"]}
    assert a["pair"]["consumers"] == 2 and a["pair"]["on_one_worker"] == 1
