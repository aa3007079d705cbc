"""The layout table of README.md and the links of the project's docs stay true.

* Every Go package (`go list ./...`) has a row in the README's layout table
  (the table under "## Layout"), by its path relative to the repository. A
  package under an `internal/` directory is covered by the row of the path
  before `/internal/` (cmd/dask-go-sim/internal/sim by cmd/dask-go-sim).
* Every folder directly under scripts/ has a row, and every top-level
  directory tracked by git (except hidden ones such as .ci) has a row of its
  own or rows of paths inside it.
* Every relative link (`[text](target)`, images too) in the docs below
  points at a file or directory that exists, and a `#fragment` into a
  markdown file names one of its headings.
* The engine does not import the Python bridge: `go list -deps ./scheduler`
  has no daskgo/compat package.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [
    "README.md",
    "scheduler/server/README.md",
    "compat/README.md",
    "scripts/bench/README.md",
    "scripts/bench/results/README.md",
]


def go(*args: str) -> str:
    exe = shutil.which("go")
    assert exe, "go is not on PATH (scripts/setup.sh needs it too)"
    return subprocess.run([exe, *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def layout_rows(text: str) -> set[str]:
    """The paths in the first column of the table under '## Layout'."""
    m = re.search(r"^## Layout.*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, "README.md has no '## Layout' section"
    rows = set()
    for line in m.group(1).splitlines():
        cells = line.strip().split("|")
        if len(cells) < 3 or not line.lstrip().startswith("|"):
            continue
        for path in re.findall(r"`([^`]+)`", cells[1]):
            rows.add(path.strip().rstrip("/"))
    assert rows, "the '## Layout' section has no table rows with `path`s"
    return rows


def covered(path: str, rows: set[str]) -> bool:
    if "/internal/" in path:
        path = path.split("/internal/")[0]
    return path in rows


def test_every_go_package_has_a_row():
    module = go("list", "-m").strip()
    rows = layout_rows(README.read_text())
    pkgs = [p for p in go("list", "./...").split() if p]
    assert pkgs
    rel = [p[len(module) + 1:] if p != module else "." for p in pkgs]
    missing = sorted(p for p in rel if not covered(p, rows))
    assert not missing, f"Go packages without a row in README.md's layout table: {missing}"


def test_every_scripts_folder_and_top_level_directory_has_a_row():
    rows = layout_rows(README.read_text())
    scripts = sorted(f"scripts/{d.name}" for d in (ROOT / "scripts").iterdir()
                     if d.is_dir() and not d.name.startswith((".", "_")))
    assert scripts
    missing = [d for d in scripts if d not in rows]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    top = sorted({f.split("/")[0] for f in tracked.splitlines() if "/" in f and not f.startswith(".")})
    assert top
    missing += [d for d in top if d not in rows and not any(r.startswith(d + "/") for r in rows)]
    assert not missing, f"folders without a row in README.md's layout table: {missing}"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    s = re.sub(r"[`*_]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M)}


def relative_links(doc: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)  # nor do code spans
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("name", DOCS)
def test_relative_links_resolve(name):
    doc = ROOT / name
    assert doc.exists(), name
    broken = []
    for target in relative_links(doc):
        path, _, fragment = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(target + " (no such heading)")
    assert not broken, f"{name}: broken links {broken}"


def test_the_engine_does_not_import_compat():
    bridge = go("list", "-m").strip() + "/compat"
    deps = go("list", "-deps", "./scheduler").split()
    bad = [d for d in deps if d == bridge or d.startswith(bridge + "/")]
    assert not bad, f"package scheduler depends on the Python bridge: {bad}"
