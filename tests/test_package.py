"""The Python package (compat/python), installed as a user installs it.

One fresh virtualenv for the module, made here with `python -m venv` (no
system site packages), with the pinned dask and distributed of
requirements.txt (their dependencies constrained by its pins too). Wheels come
from a wheelhouse filled once by `pip download` and kept between runs
($DASK_GO_SCHEDULER_WHEELHOUSE, default ~/.cache/dask-go-scheduler-tests),
so the installs here run offline (--no-index) and quickly. Then:

- without `go` on PATH, `pip install ./compat/python` fails saying Go is a
  build requirement;
- `pip install ./compat/python` builds the binary; `dask-go-scheduler` and
  `dask-scheduler` are on the venv's PATH; a script run outside the
  checkout, with no Go on PATH, makes `LocalGoCluster(n_workers=2)`,
  computes, scales to 4 and back to 1 with 100 persisted keys that survive
  the scale-down unchanged and are never recomputed (each execution appends
  a line to a file);
- the sdist carries the Go source the build needs and nothing else of the
  repository, and installs from a copy outside the checkout;
- compat/Dockerfile: its build context (compat/Dockerfile.dockerignore)
  holds what its commands read; its `pip wheel` command, run on a copy of
  that context, makes a wheel with the binary; installed, the image's
  `dask-scheduler --host 0.0.0.0` (the dask-kubernetes operator's
  arguments) answers the /health probe. Docker itself is not run: there is
  none on the test machines.

Every process started here is stopped by its PID (stop()), also on failure.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from cluster import ROOT, free_port, stop, wait_for

pytestmark = pytest.mark.timeout(900)

PKG = ROOT / "compat" / "python"
VERSION = "0.1.0.dev0"
BUILD_REQUIREMENTS = ["setuptools>=70.1", "wheel"]  # compat/python/pyproject.toml's, and for build_sdist


def pins() -> dict[str, str]:
    """requirements.txt's `name==version` lines, extras dropped (pip refuses
    extras in a constraints file)."""
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==")
            out[re.sub(r"\[.*\]", "", name).strip().lower()] = version.strip()
    return out


def clean_env(venv: Path, go: bool) -> dict[str, str]:
    """A user's shell in the venv: its bin first, no settings of this test
    suite (PYTHONPATH, DASK_GO_SCHEDULER_BINARY, DASK_*), Go on PATH or not."""
    path = [str(venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]
    if go:
        path.insert(1, str(Path(shutil.which("go")).parent))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "DASK_", "VIRTUAL_ENV")) and k != "PATH"}
    env.update(PATH=os.pathsep.join(path), VIRTUAL_ENV=str(venv), PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def run(cmd, *, env, cwd=None, timeout=600, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.Popen([str(c) for c in cmd], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        stop(proc)
    res = subprocess.CompletedProcess(proc.args, proc.returncode, out, "")
    if check and res.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited with {res.returncode}:\n{out[-6000:]}", pytrace=False)
    return res


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> tuple[Path, Path]:
    """(wheel folder, constraints file): the pinned dask and distributed,
    their dependencies under requirements.txt's pins, and the build backend."""
    p = pins()
    constraints = tmp_path_factory.mktemp("constraints") / "constraints.txt"
    constraints.write_text("".join(f"{k}=={v}\n" for k, v in sorted(p.items())))
    wanted = [f"dask=={p['dask']}", f"distributed=={p['distributed']}", *BUILD_REQUIREMENTS]
    key = hashlib.sha256((constraints.read_text() + " ".join(wanted) + sys.version).encode()).hexdigest()[:16]
    base = Path(os.environ.get("DASK_GO_SCHEDULER_WHEELHOUSE", Path.home() / ".cache" / "dask-go-scheduler-tests"))
    wh = base / f"wheels-{key}"
    if not (wh / ".complete").exists():
        wh.mkdir(parents=True, exist_ok=True)
        run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", wh, "-c", constraints, *wanted],
            env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
        (wh / ".complete").write_text(" ".join(wanted))
    return wh, constraints


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheelhouse) -> Path:
    wh, constraints = wheelhouse
    v = tmp_path_factory.mktemp("fresh") / "venv"
    t0 = time.monotonic()
    run([sys.executable, "-m", "venv", v], env=clean_env(v, go=False))
    assert "include-system-site-packages = false" in (v / "pyvenv.cfg").read_text()
    p = pins()
    pip_install(v, wh, "-c", constraints, f"dask=={p['dask']}", f"distributed=={p['distributed']}", *BUILD_REQUIREMENTS)
    print(f"fresh venv with dask {p['dask']}: {time.monotonic() - t0:.1f} s")
    return v


def pip_install(v: Path, wh: Path, *args, go: bool = True, check: bool = True) -> subprocess.CompletedProcess:
    return run([v / "bin" / "python", "-m", "pip", "install", "--no-index", "--find-links", wh, *args],
               env=clean_env(v, go=go), cwd=ROOT, check=check)


def test_install_without_go_fails_saying_go_is_a_build_requirement(venv, wheelhouse):
    env = clean_env(venv, go=False)
    assert shutil.which("go", path=env["PATH"]) is None
    res = pip_install(venv, wheelhouse[0], "--force-reinstall", "--no-deps", "./compat/python", go=False, check=False)
    assert res.returncode != 0
    assert "Go is a build requirement" in res.stdout and "`go` was not found on PATH" in res.stdout, res.stdout[-3000:]


SCALE_SCRIPT = r'''
import json, os, sys, time
from distributed import Client, wait
import dask.bag as db
from dask_go_scheduler import LocalGoCluster

RUNS = sys.argv[1]

def square(i):
    with open(RUNS, "a") as f:  # one line per execution, from whichever worker process
        f.write(f"{i}\n")
    return i * i

def runs():
    with open(RUNS) as f:
        return sorted(int(x) for x in f.read().split())

def main():
    out = {}
    t0 = time.monotonic()
    with LocalGoCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, Client(cluster) as c:
        out["start_s"] = time.monotonic() - t0
        out["repr"] = repr(cluster)
        out["dashboard_link"] = cluster.dashboard_link
        out["scheduler_pid"] = cluster.scheduler.pid
        # identity(n_workers=-1), not c.scheduler_info(): that returns the
        # client's cached copy, which its own 2 s update (n_workers=0) may
        # replace with one listing no workers
        out["workers_at_start"] = len(c.sync(c.scheduler.identity, n_workers=-1)["workers"])
        out["bag_sum"] = db.from_sequence(range(1000), npartitions=8).map(lambda x: 3 * x).sum().compute()

        cluster.scale(4)
        c.wait_for_workers(4, timeout=120)
        out["workers_after_scale_up"] = len(cluster.scheduler_info["workers"])
        futs = c.map(square, range(100), key=[f"square-{i}" for i in range(100)])
        wait(futs)
        before = c.gather(futs)
        holders = {k: sorted(v) for k, v in c.who_has(futs).items()}
        out["holders_before"] = len({w for ws in holders.values() for w in ws})
        out["runs_before"] = runs()

        t1 = time.monotonic()
        cluster.scale(1)
        while (len(cluster.scheduler_info["workers"]) != 1 or len(cluster.workers) != 1) and time.monotonic() - t1 < 120:
            time.sleep(0.05)
        out["scale_down_s"] = time.monotonic() - t1
        out["workers_after_scale_down"] = len(cluster.scheduler_info["workers"])
        out["nannies_after_scale_down"] = len(cluster.workers)
        survivor = list(cluster.scheduler_info["workers"])[0]
        out["keys_not_on_survivor_before"] = sum(1 for ws in holders.values() if survivor not in ws)
        after = c.gather(futs)
        out["same_values"] = after == before == [i * i for i in range(100)]
        out["all_on_survivor"] = all(list(ws) == [survivor] for ws in c.who_has(futs).values())
        out["runs_after"] = runs()
        logs = cluster.get_logs()
        out["log_sources"] = sorted(logs)
    out["scheduler_exited"] = True
    try:
        os.kill(out["scheduler_pid"], 0)
        out["scheduler_exited"] = False
    except ProcessLookupError:
        pass
    print("RESULT " + json.dumps(out))

if __name__ == "__main__":
    main()
'''


def test_pip_install_then_local_go_cluster_scales_keeping_persisted_keys(venv, wheelhouse, tmp_path):
    t0 = time.monotonic()
    pip_install(venv, wheelhouse[0], "--force-reinstall", "--no-deps", "./compat/python")
    install_s = time.monotonic() - t0
    env = clean_env(venv, go=False)  # Go is for building only
    for cmd in ("dask-go-scheduler", "dask-scheduler"):
        out = run([venv / "bin" / cmd, "--version"], env=env, cwd=tmp_path).stdout
        assert out.strip() == f"dask-go-scheduler, version {VERSION}", out
    where = run([venv / "bin" / "python", "-c", "import dask_go_scheduler as d; print(d.binary_path())"],
                env=env, cwd=tmp_path).stdout.strip()
    assert Path(where).is_relative_to(venv) and Path(where).name == "dask-go-scheduler", where

    script = tmp_path / "scale.py"
    script.write_text(SCALE_SCRIPT)
    t1 = time.monotonic()
    res = run([venv / "bin" / "python", script, tmp_path / "runs"], env=env, cwd=tmp_path, timeout=300)
    script_s = time.monotonic() - t1
    line = next((x for x in res.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, res.stdout[-5000:]
    out = json.loads(line[len("RESULT "):])
    print(f"pip install {install_s:.1f} s, script {script_s:.1f} s, cluster start {out['start_s']:.1f} s, "
          f"scale-down {out['scale_down_s']:.1f} s; {out['keys_not_on_survivor_before']} of 100 keys moved")

    assert out["repr"].startswith("LocalGoCluster(") and "workers=2" in out["repr"], out["repr"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/status", out["dashboard_link"]), out["dashboard_link"]
    assert out["workers_at_start"] == 2
    assert out["bag_sum"] == 3 * sum(range(1000))
    assert out["workers_after_scale_up"] == 4
    assert out["holders_before"] >= 2, "the 100 keys should be spread over the 4 workers"
    assert out["runs_before"] == list(range(100))
    assert out["workers_after_scale_down"] == 1 and out["nannies_after_scale_down"] == 1
    assert out["keys_not_on_survivor_before"] > 0, "no key had to move: the scale-down proved nothing"
    assert out["same_values"] and out["all_on_survivor"]
    assert out["runs_after"] == list(range(100)), "a persisted key was recomputed after the scale-down"
    assert {"Cluster", "Scheduler"} <= set(out["log_sources"])
    assert out["scheduler_exited"], "the scheduler process outlived the cluster"


REQUIRED_IN_SDIST = [
    "pyproject.toml", "setup.py", "README.md", "src/dask_go_scheduler/__init__.py",
    "go-src/go.mod", "go-src/go.sum", "go-src/cmd/dask-go-scheduler/main.go",
    "go-src/cmd/dask-go-scheduler/default.pgo",  # the profile the build optimizes with
    "go-src/compat/materializer.py", "go-src/compat/helper_wire.py",  # embedded: the helper's sources
    "go-src/scheduler/server/server.go",
]


def test_sdist_carries_the_go_source_and_installs_outside_the_checkout(venv, wheelhouse, tmp_path):
    env = clean_env(venv, go=True)
    dist = tmp_path / "dist"
    res = run([venv / "bin" / "python", "-c",
               f"from setuptools import build_meta as b; print('SDIST', b.build_sdist({str(dist)!r}))"],
              env=env, cwd=PKG)
    name = next(x.split()[1] for x in res.stdout.splitlines() if x.startswith("SDIST "))
    sdist = dist / name
    with tarfile.open(sdist) as tf:
        top = f"{name[:-len('.tar.gz')]}/"
        files = {m.name[len(top):] for m in tf.getmembers() if m.isfile()}
    missing = [f for f in REQUIRED_IN_SDIST if f not in files]
    assert not missing, f"missing from the sdist: {missing}"
    stray = sorted(f for f in files if f.endswith("_test.go") or "/testdata/" in f
                   or f.startswith(("go-src/tests/", "go-src/scripts/", "go-src/bin/")))
    assert not stray, f"the sdist carries files the build does not need: {stray[:10]}"
    assert any(f.startswith("go-src/scheduler/server/web/static/") for f in files), "the dashboard's files"

    copy = tmp_path / "elsewhere" / name
    copy.parent.mkdir()
    shutil.copy(sdist, copy)
    t0 = time.monotonic()
    pip_install(venv, wheelhouse[0], "--force-reinstall", "--no-deps", copy)
    print(f"install from the sdist: {time.monotonic() - t0:.1f} s")
    script = tmp_path / "smoke.py"
    # the workers by identity(n_workers=-1), as cluster.scheduler_workers
    # reads them (not c.scheduler_info(), whose cached copy the client's 2 s
    # update may blank); this venv has no tests/ to import it from
    script.write_text(
        "from distributed import Client\n"
        "from dask_go_scheduler import LocalGoCluster\n"
        "if __name__ == '__main__':\n"
        "    with LocalGoCluster(n_workers=1, processes=False, dashboard_address=':0') as cluster, Client(cluster) as c:\n"
        "        print('RESULT', c.submit(sum, [1, 2, 3]).result(),\n"
        "              len(c.sync(c.scheduler.identity, n_workers=-1)['workers']))\n")
    out = run([venv / "bin" / "python", script], env=clean_env(venv, go=False), cwd=copy.parent, timeout=120).stdout
    assert "RESULT 6 1" in out, out[-3000:]
    # built with the sdist's default.pgo: `go build` records the profile
    # in the binary's build information
    binary = run([venv / "bin" / "python", "-c", "import dask_go_scheduler; print(dask_go_scheduler.binary_path())"],
                 env=clean_env(venv, go=False), cwd=copy.parent).stdout.strip().splitlines()[-1]
    info = run([shutil.which("go"), "version", "-m", binary], env=env).stdout
    assert re.search(r"build\s+-pgo=\S*default\.pgo", info), info[-2000:]


# ---------------------------------------------------------------- compat/Dockerfile

DOCKERFILE = ROOT / "compat" / "Dockerfile"
WHEEL_CMD = "python -m pip wheel --no-deps --wheel-dir /wheels ./compat/python"


def docker_context(dest: Path) -> Path:
    """A copy of the build context compat/Dockerfile.dockerignore lets in: it
    is an allow-list (`*`, then `!path` for each top-level entry kept), then
    patterns taken out again; emulated here with fnmatch."""
    rules = [r.strip() for r in (ROOT / "compat" / "Dockerfile.dockerignore").read_text().splitlines()
             if r.strip() and not r.startswith("#")]
    assert rules[0] == "*", "the .dockerignore is expected to start from nothing (*)"
    keep = [r[1:] for r in rules[1:] if r.startswith("!")]
    drop = [r for r in rules[1:] if not r.startswith("!")]
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             check=True, capture_output=True, text=True).stdout.split()
    for rel in tracked:
        if rel.split("/")[0] not in keep or not (ROOT / rel).is_file():
            continue
        if any(fnmatch.fnmatch(rel, d) or fnmatch.fnmatch(rel, d + "/*") or
               (d.startswith("**/") and (fnmatch.fnmatch(rel, d[3:]) or fnmatch.fnmatch(rel, "*/" + d[3:])
                                         or fnmatch.fnmatch(rel, "*/" + d[3:] + "/*")))
               for d in drop):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def test_dockerfile_recipe_builds_its_wheel_from_its_context_and_serves_health(venv, wheelhouse, tmp_path):
    text = DOCKERFILE.read_text()
    assert WHEEL_CMD in text
    ctx = docker_context(tmp_path / "context")
    # every COPY source of the build stages is in the context
    for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.M):
        for src in line.split()[:-1]:
            assert (ctx / src).exists(), f"COPY {src}: not in the build context"

    wheels = tmp_path / "wheels"
    env = clean_env(venv, go=True)
    # the Dockerfile's command, offline: python is the venv's, /wheels a folder here
    args = WHEEL_CMD.split()
    args = [venv / "bin" / "python"] + [wheels if a == "/wheels" else a for a in args[1:]]
    args[args.index("wheel") + 1:args.index("wheel") + 1] = ["--no-index", "--find-links", wheelhouse[0]]
    run(args, env=env, cwd=ctx)
    (whl,) = wheels.glob("*.whl")
    assert re.fullmatch(rf"dask_go_scheduler-{re.escape(VERSION)}-py3-none-linux_\w+\.whl", whl.name), whl.name
    with zipfile.ZipFile(whl) as zf:
        info = zf.getinfo("dask_go_scheduler/bin/dask-go-scheduler")
        assert (info.external_attr >> 16) & 0o111, "the binary is not executable in the wheel"
        entry_points = zf.read(f"dask_go_scheduler-{VERSION}.dist-info/entry_points.txt").decode()
    assert "dask-scheduler = dask_go_scheduler.cli:main" in entry_points
    assert "dask-go-scheduler = dask_go_scheduler.cli:main" in entry_points

    pip_install(venv, wheelhouse[0], "--force-reinstall", "--no-deps", whl)
    # the image's check that its distributed is the version the scheduler speaks
    check = re.search(r'python -c "(import sys, distributed;[^"]+)"', text).group(1)
    run([venv / "bin" / "python", "-c", check], env=clean_env(venv, go=False), cwd=tmp_path)
    # what the dask-kubernetes operator runs in the container, with free ports
    port, dash = free_port(), free_port()
    log = open(tmp_path / "scheduler.log", "wb")
    proc = subprocess.Popen([venv / "bin" / "dask-scheduler", "--host", "0.0.0.0", "--port", str(port),
                             "--dashboard-address", f":{dash}"],
                            stdout=log, stderr=subprocess.STDOUT, env=clean_env(venv, go=False), cwd=tmp_path)
    try:
        def health():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{dash}/health", timeout=2) as r:
                    return r.read().decode() == "ok"
            except OSError:
                return False
        wait_for(health, 30, "/health on the dashboard port", proc)
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[0].endswith(b"/dask_go_scheduler/bin/dask-go-scheduler"), cmdline
        assert cmdline[cmdline.index(b"--python") + 1] == bytes(venv / "bin" / "python"), cmdline
    finally:
        stop(proc)
        log.close()
