"""dask-gateway launching the Go scheduler: dask-gateway-server with its
local backend (UnsafeLocalBackend: processes of the current user) starts
each cluster's scheduler with the `dask-scheduler` command our package
installs, adding `--preload dask_gateway.scheduler_preload --dg-*` and TLS
with the gateway's certificates. The preload runs in the scheduler's Python
host: its API on --dg-api-address takes the gateway's scale requests, its
plugin tells the gateway about workers, its heartbeats report them. A stock
dask-gateway Client scales the cluster to 2 workers, runs a computation
through the gateway's proxy, and shuts the cluster down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from cluster import ROOT, VENV_BIN, build_binary, free_port, logs_when, python_env, stop, wait_for

pytestmark = pytest.mark.timeout(300)

PACKAGE_SRC = ROOT / "compat" / "python" / "src"


def console_script(path, module, func):
    """What pip writes for a [project.scripts] entry."""
    path.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
    path.chmod(0o755)


def inc(x):
    return x + 1


# dask_gateway.Gateway.__del__ reads a loop that distributed 2026.8's
# LoopRunner no longer hands out once stopped: its own warning, not ours
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_gateway_launches_go_scheduler(tmp_path):
    from dask_gateway import BasicAuth, Gateway

    build_binary()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # the `dask-scheduler` command compat/python's pyproject installs
    console_script(bindir / "dask-scheduler", "dask_go_scheduler.cli", "main")
    api, proxy = free_port(), free_port()
    env = python_env({"DASK_GO_SCHEDULER_BINARY": str(ROOT / "bin" / "dask-go-scheduler")})
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_SRC), env["PYTHONPATH"]])
    env["PATH"] = f"{bindir}:{env['PATH']}"
    config = tmp_path / "gateway_config.py"
    config.write_text(f"""
c.DaskGateway.address = "127.0.0.1:{api}"
c.Proxy.address = "127.0.0.1:{proxy}"
c.DaskGateway.backend_class = "dask_gateway_server.backends.local.UnsafeLocalBackend"
c.LocalBackend.cluster_start_timeout = 120
c.LocalBackend.cluster_config_class = "dask_gateway_server.backends.local.LocalClusterConfig"
c.ClusterConfig.scheduler_cmd = "{bindir / 'dask-scheduler'}"
c.ClusterConfig.worker_cmd = ["{VENV_BIN / 'dask'}", "worker"]
c.ClusterConfig.worker_threads = 1
c.ClusterConfig.worker_memory = "1 G"
c.ClusterConfig.environment = {{"PYTHONPATH": {env['PYTHONPATH']!r}, "PATH": {env['PATH']!r},
                                "DASK_GO_SCHEDULER_BINARY": {env['DASK_GO_SCHEDULER_BINARY']!r}}}
c.LocalBackend.clusters_directory = "{tmp_path / 'clusters'}"
c.DaskGateway.log_level = "DEBUG"
c.LocalBackend.cluster_heartbeat_period = 1
""")
    log = open(tmp_path / "gateway.log", "wb")
    server = subprocess.Popen([str(VENV_BIN / "dask-gateway-server"), "-f", str(config)], cwd=tmp_path,
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    cluster = None
    try:
        gw = Gateway(f"http://127.0.0.1:{api}", proxy_address=f"tls://127.0.0.1:{proxy}",
                     auth=BasicAuth("tester", None))
        wait_for(lambda: _up(gw), 60, "dask-gateway-server", server)
        cluster = gw.new_cluster()
        cluster.scale(2)
        with cluster.get_client() as client:
            client.wait_for_workers(2, timeout=120)
            futs = client.map(inc, range(100))
            assert client.gather(futs) == list(range(1, 101))
            # the scheduler is ours: its Python host's parent is the Go binary
            exe = client.run_on_scheduler(lambda: os.readlink(f"/proc/{os.getppid()}/exe"))
            assert exe.endswith("dask-go-scheduler"), exe
            assert "gateway" in client.run_on_scheduler(
                lambda dask_scheduler: list(dask_scheduler.plugins.values())[0].__class__.__module__)
            # the gateway learns of both workers from the preload's plugin
            # (add_worker) through its heartbeats
            logs_when(lambda: (tmp_path / "gateway.log").read_text(errors="replace"),
                      lambda t: "n_active: 2" in t, timeout=30)
        cluster.shutdown()
        cluster = None
        wait_for(lambda: not gw.list_clusters(), 60, "the cluster stopping")
        gw.close()
    finally:
        if cluster is not None:
            try:
                cluster.shutdown()
            except Exception:
                pass
        server.send_signal(signal.SIGTERM)  # the gateway stops its clusters' processes
        stop(server, grace=30)
        log.close()
        print((tmp_path / "gateway.log").read_text(errors="replace")[-6000:])


def _up(gw):
    try:
        gw.list_clusters()
        return True
    except Exception:
        return False
