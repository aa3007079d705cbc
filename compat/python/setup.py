"""Build hooks of the dask-go-scheduler package (metadata: pyproject.toml).

Installing the package builds the Go binary with `go build` (Go is a build
requirement) and ships it as dask_go_scheduler/bin/dask-go-scheduler, found
at run time by dask_go_scheduler._binary. The Go source is the repository's
module (go.mod, `module daskgo`):

    checkout:  compat/python/setup.py   → ../../go.mod   (the repository)
    sdist:     <sdist>/setup.py         → go-src/go.mod  (copied in by `sdist`)

The sdist carries exactly what `go build ./cmd/dask-go-scheduler` reads:
go.mod, go.sum and, for every package of the module the command depends on,
its Go files and embedded files (`go list -deps -json`), the materializer's
Python files and the dashboard's static files among them. Go modules the
build needs are downloaded by `go` itself (GOPROXY), as in any Go build.

The wheel is tagged py3-none-<platform>: the binary is native code, but it
does not link against Python (CGO_ENABLED=0 unless set), so one wheel fits
every Python of that platform.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1 (pyproject.toml asks for newer)
    from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
MODULE = "daskgo"
COMMAND = "./cmd/dask-go-scheduler"
BINARY = "dask-go-scheduler"
GO_SRC = "go-src"  # the Go source's folder inside an sdist


def fail(msg: str) -> None:
    """Stop the build with msg (pip shows it under the build's output)."""
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(f"dask-go-scheduler: {msg}")


def go_module_of(root: Path) -> str | None:
    try:
        for line in (root / "go.mod").read_text().splitlines():
            if line.startswith("module "):
                return line.split()[1]
    except OSError:
        return None
    return None


def go_source() -> Path:
    """The Go module to build: an sdist's go-src, else the checkout's root."""
    for root in (HERE / GO_SRC, HERE.parent.parent):
        if go_module_of(root) == MODULE:
            return root
    fail(f"the Go source of dask-go-scheduler (go.mod with `module {MODULE}`) is neither in "
         f"{HERE / GO_SRC} (an sdist) nor in {HERE.parent.parent} (a checkout of the repository)")


def go_command() -> str:
    go = shutil.which(os.environ.get("GO", "go"))
    if not go:
        want = "the version in go.mod's `go` line"
        try:
            for line in (go_source() / "go.mod").read_text().splitlines():
                if line.startswith("go "):
                    want = "Go >= " + line.split()[1]
        except SystemExit:
            pass
        fail("installing this package builds the scheduler, which is written in Go, and `go` was not found "
             f"on PATH: Go is a build requirement ({want}, https://go.dev/dl/); put `go` on PATH or set "
             "GO=/path/to/go, then install again")
    return go


def go_build(out: Path, version: str) -> None:
    src, go = go_source(), go_command()
    out = out.resolve()  # go runs in src, not here
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("CGO_ENABLED", "0")  # a static binary: no libc or Python to match at run time
    # no -trimpath: without it the build shares the Go build cache with
    # scripts/setup.sh's and any other checkout's or sdist's (seconds, not a minute)
    cmd = [go, "build", "-ldflags", f"-s -w -X main.version={version}", "-o", str(out), COMMAND]
    print(f"dask-go-scheduler: building the scheduler: {' '.join(cmd)} (in {src})", flush=True)
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"`go build` failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    out.chmod(0o755)


class BuildPyWithGo(build_py):
    """build_py, then the Go binary into the package's bin/."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            # `pip install -e`: the package is imported from src/
            out = HERE / "src" / "dask_go_scheduler" / "bin" / BINARY
        else:
            out = Path(self.build_lib) / "dask_go_scheduler" / "bin" / BINARY
        go_build(out, self.distribution.get_version())
        self._go_binary = str(out)

    def get_outputs(self, include_bytecode=True):
        outs = list(super().get_outputs(include_bytecode))
        if getattr(self, "_go_binary", None):
            outs.append(self._go_binary)
        return outs


def module_files(src: Path) -> list[str]:
    """The files of src that `go build COMMAND` reads: go.mod, go.sum, the
    Go and embedded files of every package of the module it depends on, and
    COMMAND's default.pgo (the profile `go build` optimizes it with)."""
    go = go_command()
    proc = subprocess.run([go, "list", "-deps", "-json", COMMAND], cwd=src, capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"`go list -deps {COMMAND}` failed:\n{proc.stderr}")
    files = ["go.mod", "go.sum"]
    pgo = Path(COMMAND) / "default.pgo"
    if (src / pgo).is_file():
        files.append(str(pgo))
    dec, text, i = json.JSONDecoder(), proc.stdout, 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        pkg, i = dec.raw_decode(text, i)
        if (pkg.get("Module") or {}).get("Path") != MODULE:
            continue
        rel = Path(pkg["Dir"]).relative_to(src)
        for field in ("GoFiles", "CgoFiles", "IgnoredGoFiles", "SFiles", "HFiles", "CFiles", "EmbedFiles"):
            files += [str(rel / f) for f in pkg.get(field) or []]
    return sorted(set(files))


class SdistWithGo(sdist):
    """sdist, plus the Go source under go-src/."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        src = go_source()
        dest = Path(base_dir) / GO_SRC
        for rel in module_files(src):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)


class BinaryDistribution(Distribution):
    """The package carries native code (the binary), so the wheel is not
    pure and its files go to platlib, at the wheel's root."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """A wheel for this platform, any Python 3: the binary does not link
    against Python."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(distclass=BinaryDistribution,
      cmdclass={"build_py": BuildPyWithGo, "sdist": SdistWithGo, "bdist_wheel": PlatformWheel})
