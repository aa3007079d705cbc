"""pytest plugin for dask_tests.py: runs dask's own tests against a running
scheduler. At start it connects a stock Client to $DASK_TESTS_SCHEDULER,
which becomes the default scheduler of every .compute()/.persist() without an
explicit one, and points dask.array.utils.assert_eq at it too: assert_eq
defaults to scheduler="sync", so its default is replaced by None (the
default Client). Tests that name a scheduler themselves keep it.
"""

from __future__ import annotations

import os

_client = None


def pytest_configure(config):
    global _client
    import dask.array.utils
    from distributed import Client

    address = os.environ["DASK_TESTS_SCHEDULER"]
    _client = Client(address, timeout=60, set_as_default=True)
    _client.wait_for_workers(int(os.environ.get("DASK_TESTS_WORKERS", "1")), timeout=120)
    for fn in (dask.array.utils.assert_eq,):
        fn.__defaults__ = tuple(None if d == "sync" else d for d in fn.__defaults__)


def pytest_unconfigure(config):
    if _client is not None:
        _client.close(timeout=30)
