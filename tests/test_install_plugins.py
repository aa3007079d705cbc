"""distributed's PipInstall and UploadDirectory, both SchedulerPlugins in
2026.8, registered on the Go scheduler by stock Clients: their start() runs
in the scheduler's Python host and registers a worker (or nanny) plugin
back through the Go scheduler, which stock workers run. PipInstall
installs a small wheel built here (offline), and the package imports on
every worker; UploadDirectory puts a directory's files on every worker."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from distributed import Client
from distributed.diagnostics.plugin import PipInstall, UploadDirectory

from cluster import TESTS, GoScheduler, Workers, scheduler_workers

pytestmark = pytest.mark.timeout(300)


def build_wheel(tmp):
    pkg = tmp / "src" / "plugtestpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 'installed by PipInstall'\n")
    (tmp / "src" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "plugtestpkg"\nversion = "1.0"\n')
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(dist), str(tmp / "src")], check=True, capture_output=True, timeout=120)
    (wheel,) = dist.glob("plugtestpkg-1.0-*.whl")
    return wheel


@pytest.fixture
def cluster(tmp_path):
    # the workers (and the scheduler's host) import from target once pip put
    # the package there: a site directory of the environment, kept in tmp so
    # the shared environment is left as it was
    target = tmp_path / "site"
    target.mkdir()
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), str(target)])}
    sched = GoScheduler(tmp_path, env=env)
    workers = Workers(tmp_path)
    try:
        sched.start()
        for name in ("w0", "w1"):
            workers.start(sched.address, name, env=env)
        with Client(sched.address, timeout=60) as c:
            c.wait_for_workers(2, timeout=120)
        yield sched, target
    finally:
        workers.stop()
        sched.stop()


def import_value():
    import importlib

    importlib.invalidate_caches()
    import plugtestpkg

    return plugtestpkg.VALUE


def test_pip_install_local_wheel(cluster, tmp_path):
    sched, target = cluster
    wheel = build_wheel(tmp_path / "wheel")
    with Client(sched.address, timeout=60) as c:
        with pytest.raises(ModuleNotFoundError):
            c.run(import_value)
        c.register_plugin(PipInstall(packages=[str(wheel)],
                                     pip_options=["--no-index", "--no-deps", "--target", str(target)]))
        got = c.run(import_value)
        assert sorted(got) == sorted(scheduler_workers(c))
        assert set(got.values()) == {"installed by PipInstall"}
        # the scheduler side ran the installer too, as distributed's does
        assert c.run_on_scheduler(import_value) == "installed by PipInstall"


def read_uploaded(dask_worker, name):
    base = os.path.join(dask_worker.local_directory, name)
    return sorted(
        (os.path.relpath(os.path.join(root, f), base), open(os.path.join(root, f)).read())
        for root, _, files in os.walk(base) for f in files)


def test_upload_directory(cluster, tmp_path):
    sched, _ = cluster
    up = tmp_path / "payload"
    (up / "sub").mkdir(parents=True)
    (up / "a.txt").write_text("alpha")
    (up / "sub" / "b.txt").write_text("beta")
    (up / "skip.pyc").write_text("skipped by UploadDirectory's default filter")
    with Client(sched.address, timeout=60) as c:
        c.register_plugin(UploadDirectory(str(up)))
        got = c.run(read_uploaded, name="payload", nanny=True)
        assert len(got) == 2
        for files in got.values():
            assert files == [("a.txt", "alpha"), (os.path.join("sub", "b.txt"), "beta")]
