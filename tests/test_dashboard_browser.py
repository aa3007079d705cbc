"""The live dashboard in a real browser: headless Chromium loads
the pages the Go scheduler serves from its binary, while stock `dask worker`
processes compute, and reads what they show from their DOM.

- /status during a computation: every worker is listed, and the task counts
  move between two screenshots taken seconds apart (the page is fed by the
  event stream, never reloaded);
- /workers, /tasks and every panel path of /individual-plots.json, open
  at once (more pages than a browser's 6 connections per host: they share
  one event stream), render their element with no JavaScript error;
- /status renders with a 1,000,000-task graph waiting on a scheduler with no
  workers (the time it takes is measured by scripts/bench/dashboard_load.py,
  not asserted here).

Chromium missing is a failure, not a skip. Screenshots are kept in the
test's tmp directory, and copied to $DASK_GO_DASHBOARD_SHOTS when set.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from distributed import Client

from browser import Browser, BrowserMissing, chromium_path
from cluster import ROOT, GoScheduler, Workers, scheduler_workers, wait_for

sys.path.insert(0, str(ROOT / "scripts" / "bench"))
from dashboard_load import persist_million  # noqa: E402

N_WORKERS = 3

# The computation: loads, a step on each, and a tree of sums (about 6,300
# tasks of 5-30 ms on 3 workers x 2 threads: some 20 s).


def load(i):
    time.sleep(0.015 + (i % 7) * 0.002)
    return i


def transform(x):
    time.sleep(0.008)
    return 2 * x


def combine(*xs):
    time.sleep(0.03)
    return sum(xs)


_computations = itertools.count()


def submit_computation(c: Client, n: int = 3000):
    # Each call's keys are its own (the number after the prefix, which
    # key_split drops, so the task prefixes stay load/transform/combine):
    # the module's tests share one cluster, and a key still held from an
    # earlier call is that call's value, as in distributed, whatever the
    # new graph says it is.
    run = next(_computations)
    xs = c.map(load, range(n), key=[f"load-{run}-{i}" for i in range(n)])
    ys = c.map(transform, xs, key=[f"transform-{run}-{i}" for i in range(n)])
    level, depth = ys, 0
    while len(level) > 1:
        depth += 1
        level = [c.submit(combine, *level[i:i + 10], key=f"combine-{run}-{depth}-{i}") for i in range(0, len(level), 10)]
    return level[0], xs + ys


def require_chromium():
    try:
        chromium_path()
    except BrowserMissing as e:
        pytest.fail(str(e), pytrace=False)


def dashboard_url(sched: GoScheduler) -> str:
    port = json.loads(sched.scheduler_file.read_text())["services"]["dashboard"]
    return f"http://127.0.0.1:{port}"


def keep_shot(path: Path) -> None:
    out = os.environ.get("DASK_GO_DASHBOARD_SHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(out) / path.name)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Go scheduler with its dashboard on a free port, 3 stock workers
    and a Client; yields (client, dashboard base URL, scheduler)."""
    tmp = tmp_path_factory.mktemp("dashboard")
    sched = GoScheduler(tmp, "--dashboard-address", "127.0.0.1:0")
    workers = Workers(tmp)
    try:
        sched.start()
        for i in range(N_WORKERS):
            workers.start(sched.address, f"worker-{i}", nthreads=2)
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(N_WORKERS, timeout=60)
            yield c, dashboard_url(sched), sched
    finally:
        workers.stop()
        sched.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    require_chromium()
    b = Browser(tmp_path_factory.mktemp("chromium"))
    try:
        yield b.start()
    finally:
        b.stop()


# What the page shows, read from its DOM.
READ_STATUS = """(() => {
  const num = (id, attr) => Number(document.getElementById(id)?.dataset[attr] ?? NaN);
  const counts = {};
  for (const e of document.querySelectorAll('[id^="count-"][data-count]')) counts[e.id.slice(6)] = Number(e.dataset.count);
  return {
    workers: [...document.querySelectorAll('#status-workers tr[data-worker]')].map((tr) => tr.dataset.worker),
    counts, done: num('tasks-done', 'value'),
    runs: num('task-stream-canvas', 'runs'),
    prefixes: [...document.querySelectorAll('#progress-list .prow')].map((r) => [r.dataset.prefix, Number(r.dataset.done), Number(r.dataset.total)]),
    queued: num('withhold-queued', 'count'),
    feed: document.getElementById('feed-status')?.dataset.mode,
  };
})()"""


def test_status_is_live_during_a_computation(cluster, browser, tmp_path):
    c, base, sched = cluster
    total, futures = submit_computation(c)
    page = browser.page()
    try:
        page.navigate(f"{base}/status")
        page.wait_for("document.body.dataset.rendered", 30, "the first render of /status")
        page.wait_for("Number(document.getElementById('task-stream-canvas').dataset.runs) > 20"
                      " && Number(document.getElementById('tasks-done').dataset.value) > 1500",
                      60, "task runs in the task stream")
        page.evaluate("document.querySelector('#panel-task-stream [data-window=\"10\"]').click()")  # the 10 s window
        first = page.evaluate(READ_STATUS)
        keep_shot(page.screenshot(tmp_path / "status-1.png", fit=".card"))
        time.sleep(3)
        second = page.evaluate(READ_STATUS)
        keep_shot(page.screenshot(tmp_path / "status-2.png", fit=".card"))
        errors = list(page.errors)
    finally:
        page.close()
    assert total.result(timeout=120) == sum(2 * i for i in range(3000))
    del futures

    addresses = sorted(scheduler_workers(c))
    assert len(addresses) == N_WORKERS
    assert sorted(first["workers"]) == addresses, first
    assert sorted(second["workers"]) == addresses, second
    assert second["feed"] == "live", second
    assert second["done"] > first["done"], (first, second)
    assert second["counts"] != first["counts"], (first, second)
    assert sum(first["counts"].values()) > 0
    prefixes = {name for name, _, _ in second["prefixes"]}
    assert {"load", "transform"} <= prefixes, second["prefixes"]
    for name, done, all_ in second["prefixes"]:
        assert 0 <= done <= all_, second["prefixes"]
    assert errors == [], errors


# The element each page or panel must render.
PAGE_ELEMENTS = {
    "/status": "#task-stream-canvas",
    "/workers": "#workers-table tbody tr[data-worker]",
    "/tasks": "#task-stream-canvas",
    "/individual-task-stream": "#task-stream-canvas",
    "/individual-progress": "#progress-list .prow",
    "/individual-workers-memory": "#workers-memory-canvas[data-workers='3']",
    "/individual-nprocessing": "#nprocessing-canvas[data-workers='3']",
    "/individual-task-counts": "#count-memory",
    "/individual-withholding": "#withhold-queued",
}


def test_every_page_and_panel_renders(cluster, browser, tmp_path):
    """All the pages open at once, as a JupyterLab session shows its panels
    in iframes: more pages than the 6 connections a browser keeps per host
    over HTTP/1.1, so they must share one event stream (feed-worker.js).
    Each renders its element, goes live, and logs no error."""
    c, base, _ = cluster
    total, futures = submit_computation(c, n=300)
    assert total.result(timeout=120) == sum(2 * i for i in range(300))
    with urllib.request.urlopen(f"{base}/individual-plots.json", timeout=10) as r:
        panels = json.load(r)
    assert set(panels.values()) <= set(PAGE_ELEMENTS), f"a panel with no expected element: {panels}"
    paths = ["/workers", "/tasks", *panels.values()]
    assert len(paths) > 6
    pages = []
    try:
        for path in paths:
            pages.append(browser.page())
            pages[-1].navigate(base + path)
        for path, page in zip(paths, pages):
            page.wait_for("document.body && document.body.dataset.rendered", 30, f"the first render of {path}")
            selector = PAGE_ELEMENTS[path]
            page.wait_for(f"!!document.querySelector({json.dumps(selector)})", 10, f"{selector} on {path}")
            if path in ("/workers", "/tasks"):
                page.wait_for("document.getElementById('feed-status').dataset.mode === 'live'", 10, f"{path} live")
            keep_shot(page.screenshot(tmp_path / f"{path.strip('/')}.png"))
            assert page.errors == [], f"{path}: {page.errors}"
        rows = pages[0].evaluate(
            "[...document.querySelectorAll('#workers-table tbody tr')].map((tr) => tr.dataset.worker)")
        assert sorted(rows) == sorted(scheduler_workers(c))
    finally:
        for page in pages:
            page.close()
    del futures


def test_status_renders_with_a_million_tasks_waiting(browser, tmp_path):
    """No workers: a 1,000,000-task graph stays queued on the scheduler;
    /status still renders, and shows the million."""
    sched = GoScheduler(tmp_path, "--dashboard-address", "127.0.0.1:0")
    try:
        sched.start()
        base = dashboard_url(sched)
        with Client(sched.address, timeout=30) as c:
            held = persist_million(c)

            def state_total():
                with urllib.request.urlopen(f"{base}/dashboard/state.json", timeout=10) as r:
                    return sum(json.load(r)["counts"].values()) >= 1_000_000

            wait_for(state_total, 600, "the scheduler to hold the million tasks", sched.proc)
            page = browser.page()
            try:
                page.navigate(f"{base}/status")
                page.wait_for("document.body.dataset.rendered", 60, "the first render of /status")
                total = page.wait_for(
                    "Number(document.getElementById('count-total').dataset.count) >= 1000000"
                    " && Number(document.getElementById('count-total').dataset.count)", 30, "the million in the counts")
                keep_shot(page.screenshot(tmp_path / "status-million.png"))
                assert total >= 1_000_000
                assert page.errors == [], page.errors
            finally:
                page.close()
            del held
    finally:
        sched.stop()
