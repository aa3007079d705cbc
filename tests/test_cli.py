"""`dask scheduler`'s command line, as deployment tools pass it and flag by
flag (distributed/cli/dask_scheduler.py).

The Helm chart and dask-kubernetes' KubeCluster start `dask-scheduler` with
fixed argument lists and then probe /health on the dashboard port; an image
whose `dask-scheduler` is our binary must take those lists as they are. The
lists run here under the name `dask-scheduler`, with free ports in place of
8786 and 8787 (other tests run beside these); that the lists without ports
mean 8786 and :8787 is TestParseArgs' (cmd/dask-go-scheduler/cli_test.go).

Then every flag of `dask scheduler` is passed and its effect checked: the
port bound, the address in the scheduler file, the dashboard where asked,
the files written and removed, the idle timeout closing the scheduler, TLS;
flags distributed deprecated and ignores are accepted; the ones this
scheduler cannot honour stop the start naming them.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from distributed import Client

from cluster import BINARY, ROOT, VENV_BIN, Workers, build_binary, free_port, logs_when, python_env, stop, wait_for

pytestmark = pytest.mark.timeout(120)

# dask/templates/dask-scheduler-deployment.yaml, ports made free
HELM_ARGS = ["--port={port}", "--dashboard-address=:{dash}"]
# dask_kubernetes make_scheduler_spec (["--host", "0.0.0.0"]), ports made free
KUBECLUSTER_ARGS = ["--host", "0.0.0.0", "--port", "{port}", "--dashboard-address", ":{dash}"]


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
    port, dash = free_port(), free_port()
    exe = dask_scheduler(tmp_path)
    proc = start(tmp_path, ["dask-scheduler", *(a.format(port=port, dash=dash) for a in args)])
    workers = Workers(tmp_path)
    try:
        wait_for(lambda: get(f"http://127.0.0.1:{dash}/health") == (200, "ok"), 30, f"/health on :{dash}", proc)
        assert get(f"http://127.0.0.1:{dash}/status")[0] == 200  # the Helm chart's example readiness probe
        workers.start(f"tcp://127.0.0.1:{port}", "w0")
        with Client(f"tcp://127.0.0.1:{port}", timeout=30) as c:
            c.wait_for_workers(1, timeout=60)
            assert c.submit(inc, 41).result(timeout=60) == 42
            assert sum(c.gather(c.map(inc, range(100)))) == sum(range(1, 101))
            assert c.scheduler_info()["services"] == {"dashboard": dash}
            assert c.dashboard_link.endswith(f":{dash}/status")
    finally:
        workers.stop()
        stop(proc)
    assert proc.returncode == 0, (tmp_path / "scheduler.log").read_text()
    assert exe.exists()


@contextmanager
def scheduler(tmp: Path, *args: str, sched_file: Path | None = None):
    """The binary with args (and a scheduler file unless args name one);
    yields (process, address) once the file is written, stops it after."""
    sched_file = sched_file or tmp / "sched.json"
    argv = [str(BINARY), *args]
    if "--scheduler-file" not in args:
        argv += ["--scheduler-file", str(sched_file)]
    build_binary()
    proc = start(tmp, argv)

    def address():
        try:
            return json.loads(sched_file.read_text())["address"]
        except (OSError, ValueError, KeyError):
            return None

    try:
        yield proc, wait_for(address, 30, "scheduler file", proc)
    finally:
        stop(proc)


def log(tmp: Path) -> str:
    return (tmp / "scheduler.log").read_text(errors="replace")


def test_host_port_protocol_pid_file_and_scheduler_file(tmp_path):
    port = free_port()
    pid_file, sched_file = tmp_path / "sched.pid", tmp_path / "info.json"
    with scheduler(tmp_path, "--host", "127.0.0.1", "--port", str(port), "--protocol", "tcp",
                   "--pid-file", str(pid_file), "--scheduler-file", str(sched_file),
                   "--dashboard-address", "127.0.0.1:0", sched_file=sched_file) as (proc, address):
        assert address == f"tcp://127.0.0.1:{port}"
        info = json.loads(sched_file.read_text())
        assert info["type"] == "Scheduler" and info["address"] == address
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # --port is bound
        assert pid_file.read_text().strip() == str(proc.pid)
        with Client(address, timeout=30) as c:
            assert c.scheduler_info()["address"] == address
    assert proc.returncode == 0, log(tmp_path)
    assert not pid_file.exists() and not sched_file.exists(), "--pid-file and --scheduler-file are removed at exit"


@pytest.mark.parametrize("args,want", [
    (["--host", "tcp://127.0.0.1:{port}"], "tcp://127.0.0.1:{port}"),  # a URL with the port in it
    (["--host", "127.0.0.1:{other}", "--port", "{port}"], "tcp://127.0.0.1:{port}"),  # --port wins
    (["--interface", "lo", "--port", "{port}"], "tcp://127.0.0.1:{port}"),  # lo's IPv4 address
])
def test_host_and_interface_choose_the_address(tmp_path, args, want):
    port, other = free_port(), free_port()
    args = [a.format(port=port, other=other) for a in args]
    with scheduler(tmp_path, *args, "--dashboard-address", "127.0.0.1:0") as (proc, address):
        assert address == want.format(port=port)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


@pytest.mark.parametrize("args,served,missing", [
    # --dashboard (the default): pages and routes on --dashboard-address
    (["--dashboard", "--dashboard-address", "127.0.0.1:{dash}"], ["/health", "/status", "/metrics"], []),
    # a bare port; --no-dashboard: routes answer, pages do not (as
    # distributed without its Bokeh apps)
    (["--no-dashboard", "--dashboard-address", "{dash}"], ["/health", "/metrics"], ["/status"]),
    # --dashboard-prefix: everything under it
    (["--dashboard-address", ":{dash}", "--dashboard-prefix", "/dask"], ["/dask/health", "/dask/status"], ["/health", "/status"]),
])
def test_dashboard_flags(tmp_path, args, served, missing):
    dash = free_port()
    with scheduler(tmp_path, "--port", "0", *(a.format(dash=dash) for a in args)) as (proc, address):
        base = f"http://127.0.0.1:{dash}"
        wait_for(lambda: get(base + served[0])[0] == 200, 30, served[0], proc)
        for path in served:
            assert get(base + path)[0] == 200, path
        for path in missing:
            assert get(base + path)[0] == 404, path
        with Client(address, timeout=30) as c:
            assert c.scheduler_info()["services"] == {"dashboard": dash}


def test_deprecated_and_negated_flags_are_accepted(tmp_path):
    """--show/--no-show and --use-xheaders are deprecated and ignored by
    distributed too; --no-jupyter is the default. The scheduler starts and
    serves with them."""
    with scheduler(tmp_path, "--port", "0", "--dashboard-address", "127.0.0.1:0", "--show", "--no-show",
                   "--use-xheaders", "True", "--no-jupyter") as (proc, address):
        with Client(address, timeout=30) as c:
            assert c.scheduler_info()["address"] == address


def test_idle_timeout_closes_the_scheduler(tmp_path):
    """--idle-timeout: with nothing to do for that long, the scheduler
    closes by itself (Scheduler.check_idle), exit status 0, its files gone."""
    sched_file = tmp_path / "sched.json"
    t0 = time.monotonic()
    with scheduler(tmp_path, "--port", "0", "--dashboard-address", "127.0.0.1:0", "--idle-timeout", "1s",
                   sched_file=sched_file) as (proc, address):
        proc.wait(timeout=20)
    took = time.monotonic() - t0
    assert proc.returncode == 0, log(tmp_path)
    assert 1 <= took < 20, took
    assert "closing after being idle" in logs_when(lambda: log(tmp_path), lambda t: "closing after being idle" in t), log(tmp_path)
    assert not sched_file.exists()


def test_tls_flags_put_the_scheduler_on_tls(tmp_path):
    """--tls-ca-file, --tls-cert, --tls-key: the address is tls://, and a
    client presenting a certificate from the CA is served."""
    from distributed.security import Security
    from test_tls import CA

    ca = CA(tmp_path, "cli")
    cert, key = ca.leaf("peer")
    port = free_port()
    with scheduler(tmp_path, "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", "127.0.0.1:0",
                   "--tls-ca-file", str(ca.path), "--tls-cert", cert, "--tls-key", key) as (proc, address):
        assert address == f"tls://127.0.0.1:{port}"
        security = Security(tls_ca_file=str(ca.path), tls_client_cert=cert, tls_client_key=key, require_encryption=True)
        with Client(address, security=security, timeout=30) as c:
            assert c.scheduler_info()["address"] == address


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
    (["extra", "words"], "extra argument"),  # PRELOAD_ARGV, without a preload to take it
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


def test_every_stock_flag_is_accepted_tested_and_in_the_readme_table():
    flags = stock_flags()
    assert len(flags) >= 20, flags  # --host ... --version, --help, the --no- forms
    build_binary()
    ours = subprocess.run([str(BINARY), "--help"], capture_output=True, text=True, timeout=30).stderr
    table = (ROOT / "cmd" / "dask-go-scheduler" / "README.md").read_text()
    here = Path(__file__).read_text()
    for flag in flags:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", ours), f"{flag} missing from dask-go-scheduler --help"
        # each flag is passed, and its effect checked, by a test above
        assert re.search(rf'"{re.escape(flag)}[="]', here), f"{flag} is passed by no test in {Path(__file__).name}"
        assert f"`{flag}" in table, f"{flag} missing from the flag table in cmd/dask-go-scheduler/README.md"
    res = subprocess.run([str(BINARY), "--version"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout.startswith("dask-go-scheduler, version ")
