"""The scheduler's Python processes (the graph helper, the scheduler-side
host) never import from the directory the scheduler was started in, as the
`dask scheduler` console script does not: a module there named like a
stdlib one must not shadow it. `python -c` puts that directory first on
sys.path; compat/proc_spawn.go's bootstrap takes it off before any import.
"""

from __future__ import annotations

import os
import sys
from functools import partial

import dask
import pytest
from distributed import Client

from cluster import GoScheduler, running_cluster

pytestmark = pytest.mark.timeout(180)

# Neither is loaded at interpreter startup, and distributed imports both
# (types also the bootstrap itself): each would be found in the working
# directory first if it were still on sys.path.
SHADOWED = ("collections", "types")


def inc(x):
    return x + 1


def host_view() -> tuple[str, str, list[str]]:
    """Run on the scheduler: its working directory, where collections came
    from, and sys.path."""
    import collections

    return os.getcwd(), collections.__file__, list(sys.path)


def test_stdlib_names_in_the_working_directory_are_not_imported(tmp_path):
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    for name in SHADOWED:
        (workdir / f"{name}.py").write_text(
            f'raise ImportError("{name}.py in the scheduler\'s working directory was imported")\n')

    def one_worker(sched, workers):
        workers.start(sched.address, "w0", nthreads=2)

    with running_cluster(tmp_path, one_worker, 1, scheduler=partial(GoScheduler, cwd=workdir)) as sched, \
            Client(sched.address, timeout=30) as c:
        # a graph goes through the materializer helper
        total = dask.delayed(sum)([dask.delayed(inc)(i) for i in range(20)])
        assert c.compute(total).result(timeout=60) == sum(range(1, 21))
        assert c.submit(inc, 41).result(timeout=60) == 42
        # run_on_scheduler starts the scheduler-side host, in workdir
        cwd, collections_file, path = c.run_on_scheduler(host_view)
        assert cwd == str(workdir)
        assert not collections_file.startswith(str(workdir)), collections_file
        assert "" not in path and str(workdir) not in path, path
