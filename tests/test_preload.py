"""Scheduler preloads run in the Go scheduler's Python host, with stock
Clients and workers: `--preload MODULE` with the click options the module
adds to the command line (distributed.preloading), a plugin and a handler
that dask_setup registers (reached as client.scheduler.greet()),
dask_teardown at shutdown, the distributed.scheduler.preload config key, and
the errors dask scheduler gives for a bad option or a missing module."""

from __future__ import annotations

import subprocess

import pytest
from distributed import Client

from cluster import BINARY, GoScheduler, Workers, build_binary, python_env, wait_for

pytestmark = pytest.mark.timeout(300)


def inc(x):
    return x + 1


def test_preload_with_click_option_registers_plugin_and_handler(tmp_path):
    done = tmp_path / "teardown.txt"
    sched = GoScheduler(tmp_path, "--preload", "preload_fixture", "--greeting", "bonjour",
                        "--teardown-file", str(done))
    workers = Workers(tmp_path)
    try:
        sched.start(timeout=120)
        workers.start(sched.address, "w0")
        with Client(sched.address, timeout=60) as c:
            c.wait_for_workers(1, timeout=60)
            assert c.sync(c.scheduler.greet, name="dask") == "bonjour, dask"
            futs = c.map(inc, range(10), key=[f"pre-{i}" for i in range(10)])
            assert c.gather(futs) == list(range(1, 11))

            def seen():
                tr = c.run_on_scheduler(lambda dask_scheduler: dict(dask_scheduler.plugins["preloaded"].transitions))
                return tr if len(tr) == 10 and all(v[-1] == "processing->memory" for v in tr.values()) else None

            tr = wait_for(seen, 30, "the preloaded plugin seeing the tasks")
            assert all(v[0] == "released->waiting" for v in tr.values())
    finally:
        workers.stop()
        sched.stop()
    assert done.read_text() == "torn down"


def test_preload_from_config(tmp_path):
    sched = GoScheduler(tmp_path, env={"DASK_DISTRIBUTED__SCHEDULER__PRELOAD": "preload_fixture",
                                       "DASK_DISTRIBUTED__SCHEDULER__PRELOAD_ARGV": '["--greeting", "hi"]'})
    try:
        sched.start(timeout=120)
        with Client(sched.address, timeout=60) as c:
            assert c.sync(c.scheduler.greet, name="config") == "hi, config"
            assert c.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.plugins)) == ["preloaded"]
    finally:
        sched.stop()


def run_binary(tmp_path, *args):
    build_binary()
    return subprocess.run([str(BINARY), "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                           "--scheduler-file", str(tmp_path / "s.json"), *args],
                          env=python_env(), capture_output=True, text=True, timeout=120)


def test_preload_bad_option_fails_start(tmp_path):
    r = run_binary(tmp_path, "--preload", "preload_fixture", "--no-such-option", "1")
    assert r.returncode != 0
    out = r.stderr + r.stdout
    assert "No such option" in out and "--no-such-option" in out, out[-2000:]


def test_preload_missing_module_fails_start(tmp_path):
    r = run_binary(tmp_path, "--preload", "no_such_preload_module")
    assert r.returncode != 0
    assert "No module named 'no_such_preload_module'" in r.stderr + r.stdout
