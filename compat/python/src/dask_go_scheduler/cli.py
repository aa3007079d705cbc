"""The ``dask-go-scheduler`` and ``dask-scheduler`` commands.

Each replaces itself (``os.execv``, same PID) with the Go binary, passing
the arguments on unchanged, ``dask scheduler``'s flags, and adds
``--python sys.executable`` unless ``--python`` is given: the scheduler's
graph helper must run in the clients' environment, which is the one this
command was installed into.
"""

from __future__ import annotations

import os
import sys

from dask_go_scheduler._binary import binary_path


def with_python(args: list[str], python: str | None = None) -> list[str]:
    """args plus ``--python PYTHON`` where no --python was given (before a
    ``--`` that ends the options, if any)."""
    if any(a == "--python" or a.startswith("--python=") for a in args):
        return list(args)
    extra = ["--python", python or sys.executable]
    if "--" in args:
        i = args.index("--")
        return [*args[:i], *extra, *args[i:]]
    return [*args, *extra]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        binary = str(binary_path())
    except FileNotFoundError as e:
        print(f"dask-go-scheduler: {e}", file=sys.stderr)
        raise SystemExit(127) from None
    os.execv(binary, [binary, *with_python(args)])


if __name__ == "__main__":
    main()
