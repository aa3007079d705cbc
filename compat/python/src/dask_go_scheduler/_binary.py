"""Where the Go binary is.

In order: the ``DASK_GO_SCHEDULER_BINARY`` environment variable; the binary
the install built into this package (``bin/dask-go-scheduler``, see
setup.py); when the package is imported straight from a checkout
(``compat/python/src`` on ``sys.path``), the checkout's
``bin/dask-go-scheduler`` (what ``scripts/setup.sh`` builds). ``PATH`` is
not searched: ``dask-go-scheduler`` there is this package's own launcher.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "DASK_GO_SCHEDULER_BINARY"
NAME = "dask-go-scheduler"
PACKAGE = Path(__file__).resolve().parent


def _checkout_binary() -> Path | None:
    # compat/python/src/dask_go_scheduler → the repository root
    root = PACKAGE.parents[3] if len(PACKAGE.parents) > 3 else None
    if root is None:
        return None
    try:
        first = (root / "go.mod").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return root / "bin" / NAME if first.strip() == "module daskgo" else None


def binary_path() -> Path:
    """The Go binary to run; FileNotFoundError says how to get one."""
    if os.environ.get(ENV):
        p = Path(os.environ[ENV])
        if not os.access(p, os.X_OK):
            raise FileNotFoundError(f"{ENV}={p}: not an executable file")
        return p
    candidates = [PACKAGE / "bin" / NAME]
    checkout = _checkout_binary()
    if checkout is not None:
        candidates.append(checkout)
    for p in candidates:
        if p.is_file() and os.access(p, os.X_OK):
            return p
    raise FileNotFoundError(
        f"the dask-go-scheduler binary is not in {' nor '.join(map(str, candidates))}: install this package "
        f"with pip (which builds it with Go), run scripts/setup.sh in a checkout, or set {ENV}=/path/to/binary")
