"""The op table (scheduler/server/ops.go, printed by --list-ops) covers every
op of the installed distributed's Scheduler: its handlers and stream_handlers,
including those its default extensions register. A new distributed release
with a new op fails here until the table says what the op gets."""

from __future__ import annotations

import asyncio
import json
import subprocess

from conftest import ensure_scheduler_binary

STATUSES = {"implemented", "partial", "no-op", "unsupported"}


def stock_tables() -> tuple[set[str], set[str]]:
    """Build (never start) a stock Scheduler in-process: __init__ fills the
    tables and runs the default extensions, which add their ops."""
    from distributed import Scheduler

    async def build():
        s = Scheduler(dashboard_address=None, validate=False, port=0)
        return set(s.handlers), set(s.stream_handlers)

    return asyncio.run(build())


def our_table() -> list[dict]:
    out = subprocess.run([str(ensure_scheduler_binary()), "--list-ops"],
                         check=True, capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout)


def test_every_stock_op_is_in_the_table():
    rpc, stream = stock_tables()
    table = our_table()
    ours_rpc = {r["op"] for r in table if r["kind"] == "rpc"}
    ours_stream = {r["op"] for r in table if r["kind"] == "stream"}
    assert rpc - ours_rpc == set(), "stock RPC ops missing from scheduler/server/ops.go"
    assert stream - ours_stream == set(), "stock stream ops missing from scheduler/server/ops.go"
    assert ours_rpc - rpc == set(), "ops.go lists RPC ops the installed distributed lacks"
    assert ours_stream - stream == set(), "ops.go lists stream ops the installed distributed lacks"


def test_every_row_says_what_the_op_gets():
    for row in our_table():
        assert row["status"] in STATUSES, row
        if row["status"] != "implemented":
            assert row.get("feature") and row.get("note"), row


def test_python_inside_the_scheduler_is_served():
    rows = {r["op"]: r for r in our_table() if r["kind"] == "rpc"}
    # run_function and scheduler plugins run in the scheduler-side Python host
    # (tests/test_host.py, tests/test_scheduler_plugins.py), feed in the engine or the
    # host (tests/test_progress.py), performance_report in the host
    # (tests/test_performance_report.py)
    for op in ("run_function", "register_scheduler_plugin", "unregister_scheduler_plugin", "feed",
               "performance_report"):
        assert rows[op]["status"] == "implemented", op
