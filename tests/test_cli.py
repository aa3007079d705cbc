"""`dask scheduler`'s command line, as deployment tools pass it.

The Helm chart and dask-kubernetes' KubeCluster start `dask-scheduler` with
fixed argument lists and then probe /health on the dashboard port; an image
whose `dask-scheduler` is our binary must take those lists exactly as they
are. Each list here runs the binary under the name `dask-scheduler` with
nothing added, so it listens on the default ports 8786 and 8787: the test
fails, saying so, when another process holds them.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from distributed import Client

from cluster import BINARY, ROOT, VENV_BIN, Workers, build_binary, free_port, python_env, stop, wait_for

pytestmark = pytest.mark.timeout(120)

HELM_ARGS = ["--port=8786", "--dashboard-address=:8787"]  # dask/templates/dask-scheduler-deployment.yaml
KUBECLUSTER_ARGS = ["--host", "0.0.0.0"]  # dask_kubernetes make_scheduler_spec


def port_free(port: int) -> bool:
    with socket.socket() as s:
        # as the scheduler binds (Go sets SO_REUSEADDR): connections of a
        # previous run in TIME-WAIT do not hold the port
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def dask_scheduler(tmp: Path) -> Path:
    """The binary under the name deployment tools call."""
    build_binary()
    link = tmp / "bin" / "dask-scheduler"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(BINARY)
    return link


def start(tmp: Path, argv: list[str], log_name: str = "scheduler.log") -> subprocess.Popen:
    log = open(tmp / log_name, "wb")
    env = python_env()
    env["PATH"] = f"{tmp / 'bin'}:{env['PATH']}"
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)


def inc(x):
    return x + 1


@pytest.mark.parametrize("tool,args", [("helm", HELM_ARGS), ("kubecluster", KUBECLUSTER_ARGS)])
def test_deployment_argument_lists_serve_health_and_compute(tmp_path, tool, args):
    busy = [p for p in (8786, 8787) if not port_free(p)]
    assert not busy, f"ports {busy} are in use by another process: this test runs {tool}'s arguments as they are, on the default ports"
    exe = dask_scheduler(tmp_path)
    proc = start(tmp_path, ["dask-scheduler", *args])
    workers = Workers(tmp_path)
    try:
        wait_for(lambda: get("http://127.0.0.1:8787/health") == (200, "ok"), 30, "/health on :8787", proc)
        assert get("http://127.0.0.1:8787/status")[0] == 200  # the Helm chart's example readiness probe
        workers.start("tcp://127.0.0.1:8786", "w0")
        with Client("tcp://127.0.0.1:8786", timeout=30) as c:
            c.wait_for_workers(1, timeout=60)
            assert c.submit(inc, 41).result(timeout=60) == 42
            assert sum(c.gather(c.map(inc, range(100)))) == sum(range(1, 101))
            assert c.scheduler_info()["services"] == {"dashboard": 8787}
            assert c.dashboard_link.endswith(":8787/status")
    finally:
        workers.stop()
        stop(proc)
    assert proc.returncode == 0, (tmp_path / "scheduler.log").read_text()
    assert exe.exists()


def test_flags_that_change_where_and_what_is_served(tmp_path):
    port, dash = free_port(), free_port()
    pid_file, sched_file = tmp_path / "sched.pid", tmp_path / "sched.json"
    proc = start(tmp_path, [str(BINARY), "--interface", "lo", "--port", str(port), "--protocol", "tcp",
                            "--dashboard-address", str(dash), "--no-dashboard", "--dashboard-prefix", "/dask",
                            "--pid-file", str(pid_file), "--scheduler-file", str(sched_file),
                            "--no-show", "--use-xheaders", "False", "--idle-timeout", "1h"])
    try:
        wait_for(sched_file.exists, 30, "scheduler file", proc)
        assert json.loads(sched_file.read_text())["address"] == f"tcp://127.0.0.1:{port}"
        assert pid_file.read_text().strip() == str(proc.pid)
        base = f"http://127.0.0.1:{dash}"
        wait_for(lambda: get(base + "/dask/health") == (200, "ok"), 30, "/dask/health", proc)
        # --no-dashboard: the routes answer, the pages do not (as distributed
        # without its Bokeh apps)
        assert get(base + "/dask/metrics")[0] == 200
        assert get(base + "/dask/status")[0] == 404
        assert get(base + "/health")[0] == 404
    finally:
        stop(proc)
    assert proc.returncode == 0
    assert not pid_file.exists() and not sched_file.exists(), "--pid-file and --scheduler-file are removed at exit"


@pytest.mark.parametrize("args,names", [
    (["--preload", "no_such_preload_module"], "No module named 'no_such_preload_module'"),
    (["--dg-api-address", "x"], "--dg-api-address"),
    (["--jupyter"], "--jupyter"),
    (["--protocol", "tls", "--tls-cert", "c.pem", "--tls-key", "k.pem"], "TLS"),
    (["--protocol", "ucx"], "--protocol ucx"),
    (["--dashboard-address", "nonsense"], "--dashboard-address"),
    (["--port", "eighty"], "--port"),
    (["--idle-timeout", "soon"], "--idle-timeout"),
    (["--nonexistent-flag"], "--nonexistent-flag"),
])
def test_unsupported_and_bad_flags_stop_the_start_naming_them(tmp_path, args, names):
    build_binary()
    res = subprocess.run([str(BINARY), "--port", "0", *args], capture_output=True, text=True, timeout=30,
                         env=python_env(), cwd=tmp_path)
    assert res.returncode != 0
    assert names in res.stderr, res.stderr


def stock_flags() -> list[str]:
    """Every flag of the installed `dask scheduler --help`."""
    out = subprocess.run([str(VENV_BIN / "dask"), "scheduler", "--help"], capture_output=True, text=True,
                         timeout=60, env=python_env()).stdout
    flags = set()
    for line in out.splitlines():
        if line.startswith("  -"):  # an option line: "  --a / --no-a  help"
            for m in re.finditer(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line.split("  ", 2)[1]):
                flags.add(m.group(1))
    return sorted(flags)


def test_every_stock_flag_is_accepted_and_in_the_readme_table():
    flags = stock_flags()
    assert len(flags) >= 20, flags  # --host ... --version, --help, the --no- forms
    build_binary()
    ours = subprocess.run([str(BINARY), "--help"], capture_output=True, text=True, timeout=30).stderr
    table = (ROOT / "cmd" / "dask-go-scheduler" / "README.md").read_text()
    for flag in flags:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", ours), f"{flag} missing from dask-go-scheduler --help"
        assert f"`{flag}" in table, f"{flag} missing from the flag table in cmd/dask-go-scheduler/README.md"
    res = subprocess.run([str(BINARY), "--version"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout.startswith("dask-go-scheduler, version ")
