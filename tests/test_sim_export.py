"""pytest for scripts/export-graph.py (a few seconds): the exported file is
a valid graph whose sizes follow dask.array's chunks, and the simulator's
reader accepts it.

    .venv/bin/python -m pytest scripts/sim/test_export_graph.py
"""

import gzip
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("export_graph", ROOT / "scripts" / "export-graph.py")
eg = importlib.util.module_from_spec(spec)
sys.modules["export_graph"] = eg  # dataclasses look their module up
spec.loader.exec_module(eg)


def read(path):
    with gzip.open(path, "rt") as f:
        header = json.loads(f.readline())
        return header, [json.loads(line) for line in f]


def test_array_graph_sizes_and_order(tmp_path):
    import dask.array as da

    x = da.ones((1000, 30), chunks=(1000, 1))  # 30 chunks of 8000 bytes
    w = eg.Workload(x.sum(axis=1), x.nbytes, 30, 4e9, 8000)
    dsk, prio = eg.materialize(w.collection)
    est = eg.estimate(w, dsk, eg.array_layers(w.collection))
    roots = [k for k in dsk if not dsk[k].dependencies]
    assert len(roots) == 30
    # a fused ones+sum root keeps a (1000, 1) column: 8000 bytes, like its input
    assert {est[k][1] for k in roots} == {8000}
    assert all(est[k][2] == 8000 for k in roots)  # the generated input chunk
    assert sorted(prio.values()) == list(range(len(dsk)))
    for k, node in dsk.items():  # dask.order runs dependencies first
        assert all(prio[d] < prio[k] for d in node.dependencies)


def test_export_file_roundtrip(tmp_path):
    out = tmp_path / "jq.jsonl.gz"
    header = eg.export("jobqueue", "small", out, 4 * 2**30, 4)
    h, tasks = read(out)
    assert h["format"] == "daskgo-sim-graph/1" and h["n_tasks"] == len(tasks) == header["n_tasks"]
    keys = [json.dumps(t[0]) for t in tasks]
    assert len(set(keys)) == len(keys)
    jobs = [t for t in tasks if isinstance(t[0], str) and t[0].startswith("job-")]
    assert len(jobs) == h["n_tasks"] - 1
    # the benchmark's seeded sleeps: 0-3 s, allocations up to 16 MiB
    assert all(0.001 <= t[3] <= 3.001 and 1 <= t[5] <= 2**24 for t in jobs)
    total = [t for t in tasks if t[2]]
    assert len(total) == 1 and sorted(total[0][2]) == sorted(i for i, t in enumerate(tasks) if t in jobs)


def test_simulator_reads_export(tmp_path):
    out = tmp_path / "jq.jsonl.gz"
    eg.export("jobqueue", "small", out, 4 * 2**30, 4)
    binary = tmp_path / "dask-go-sim"
    subprocess.run(["go", "build", "-o", str(binary), "./cmd/dask-go-sim"], cwd=ROOT, check=True)
    res = subprocess.run([str(binary), "run", "-graph", str(out), "-workers", "4", "-threads", "1",
                          "-mode", "coassign"], check=True, capture_output=True, text=True)
    r = json.loads(res.stdout)
    h, tasks = read(out)
    # 80 sleeps of at most 3 s on 4 threads: at least total/4, and finished
    busy = sum(t[3] for t in tasks)
    assert r["n_tasks"] == len(tasks) and busy / 4 <= r["makespan_s"] <= busy
    assert r["leaked_bytes"] == 0
