"""distributed.performance_report against the Go scheduler, stock Client and
stock workers: entering the block reads dask_scheduler.monitor.count
through run_on_scheduler, leaving it has the scheduler render the report
(the scheduler-side Python host, with bokeh, from the task stream, the
workers' profiles, bandwidth, the system monitor's series and the logs Go
supplies). The report opens in headless Chromium and its task stream holds
the computation's tasks, read from the bokeh document and looked at in a
screenshot."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from distributed import Client, performance_report

from browser import Browser, BrowserMissing, chromium_path
from cluster import PyScheduler, two_worker_cluster

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with two_worker_cluster(tmp_path_factory.mktemp("perf-report"), nthreads=2) as sched:
        with Client(sched.address, timeout=60) as c:
            yield c


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    try:
        chromium_path()
    except BrowserMissing as e:
        pytest.fail(str(e), pytrace=False)
    b = Browser(tmp_path_factory.mktemp("chromium"), width=1400, height=900)
    try:
        yield b.start()
    finally:
        b.stop()


def slowinc(x, delay=0.02):
    time.sleep(delay)
    return x + 1


def total(xs):
    return sum(xs)


def compute(c: Client, tag: str) -> int:
    incs = c.map(slowinc, range(60), key=[f"reportinc-{tag}-{i}" for i in range(60)])
    return c.submit(total, incs, key=f"reporttotal-{tag}").result()


def keep_shot(path: Path) -> None:
    out = os.environ.get("DASK_GO_DASHBOARD_SHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(out) / path.name)


# Every "key" column of the report's data sources, the tabs' titles and
# the Divs' text (bokeh renders them in shadow roots, out of innerText).
READ_REPORT = """(() => {
  const doc = Bokeh.documents[0];
  const keys = [], titles = [], texts = [];
  for (const m of doc.all_models) {
    if (m.data !== undefined && m.data !== null) {
      const d = m.data instanceof Map ? Object.fromEntries(m.data) : m.data;
      if (d.key) keys.push(...Array.from(d.key));
    }
    if (m.tabs !== undefined) titles.push(...m.tabs.map((t) => t.title));
    if (typeof m.text === "string") texts.push(m.text);
  }
  return {keys, titles, texts};
})()"""


def document_keys(html: str) -> set[str]:
    """The "key" columns of the bokeh document embedded in a report."""
    start = html.index('<script type="application/json"')
    doc = json.loads(html[html.index(">", start) + 1:html.index("</script>", start)])
    keys: set[str] = set()

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "key" and isinstance(x, list):
                    keys.update(y for y in x if isinstance(y, str))
                walk(x)
        elif isinstance(v, list):
            if len(v) == 2 and v[0] == "key" and isinstance(v[1], list):
                keys.update(y for y in v[1] if isinstance(y, str))
            for x in v:
                walk(x)

    walk(doc)
    return keys


def document_titles(html: str) -> list[str]:
    """The tabs' titles of the bokeh document embedded in a report, in order."""
    start = html.index('<script type="application/json"')
    doc = json.loads(html[html.index(">", start) + 1:html.index("</script>", start)])
    titles = []

    def walk(v):
        if isinstance(v, dict):
            if v.get("name") == "TabPanel" and isinstance(v.get("attributes"), dict):
                titles.append(v["attributes"].get("title"))
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(doc)
    return titles


def real_errors(errors: list[str]) -> list[str]:
    """Page errors but the template's favicon, which is on docs.dask.org
    (no network here)."""
    return [e for e in errors if "favicon" not in e]

SHOW_TAB = """((title) => {
  for (const m of Bokeh.documents[0].all_models) {
    if (m.tabs !== undefined) {
      const i = m.tabs.findIndex((t) => t.title === title);
      if (i >= 0) { m.active = i; return true; }
    }
  }
  return false;
})(%s)"""


def test_performance_report_shows_the_task_stream_in_a_browser(client, browser, tmp_path):
    """mode="inline" (bokeh's JavaScript in the file, no network): the
    report renders in Chromium without errors, its task stream's data holds
    every task of the block, and the screenshot of the Task Stream tab
    shows them."""
    path = tmp_path / "report.html"
    with performance_report(filename=str(path), mode="inline"):
        assert compute(client, "inline") == sum(range(1, 61))
    html = path.read_text()
    assert "Dask Performance Report" in html
    page = browser.page()
    try:
        page.navigate(path.as_uri())
        page.wait_for("typeof Bokeh !== 'undefined' && Bokeh.documents.length > 0", 60, "the bokeh document")
        report = page.evaluate(READ_REPORT)
        summary = "\n".join(report["texts"])
        assert "number of tasks: 61" in summary, summary[:2000]
        keys = set(report["keys"])
        wanted = {f"reportinc-inline-{i}" for i in range(60)} | {"reporttotal-inline"}
        assert wanted <= keys, sorted(wanted - keys)[:5]
        for title in ("Summary", "Task Stream", "System", "Scheduler Logs", "Worker Profile (compute)",
                      "Bandwidth (Workers)"):
            assert title in report["titles"], report["titles"]
        assert page.evaluate(SHOW_TAB % json.dumps("Task Stream"))
        time.sleep(1.5)  # let the canvas draw
        shot = page.screenshot(tmp_path / "performance-report-task-stream.png")
        keep_shot(shot)
        assert shot.stat().st_size > 10_000
        assert page.evaluate(SHOW_TAB % json.dumps("System"))
        time.sleep(1)
        keep_shot(page.screenshot(tmp_path / "performance-report-system.png"))
        assert not real_errors(page.errors), page.errors
    finally:
        page.close()


def test_performance_report_default_mode_writes_the_document(client, tmp_path):
    """The default mode (bokeh from its CDN) writes the report with the
    block's tasks in its embedded document, and a second report counts
    only its own block's tasks."""
    first, second = tmp_path / "first.html", tmp_path / "second.html"
    with performance_report(filename=str(first)):
        compute(client, "cdn1")
    with performance_report(filename=str(second)):
        compute(client, "cdn2")
    a, b = document_keys(first.read_text()), document_keys(second.read_text())
    assert {f"reportinc-cdn1-{i}" for i in range(60)} | {"reporttotal-cdn1"} <= a, sorted(a)[:5]
    assert "number of tasks: 61" in second.read_text(), "the second report counts its own block only"
    assert "reportinc-cdn2-0" in b and not any("cdn1" in k for k in b), sorted(b)[:5]


def test_monitor_through_run_on_scheduler(client):
    """dask_scheduler.monitor: the count grows every 500 ms and range_query
    answers distributed's series names with the Go process's (and its
    Python children's) memory."""
    count0 = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.monitor.count)
    time.sleep(1.2)
    q = client.run_on_scheduler(lambda dask_scheduler: (dask_scheduler.monitor.count,
                                                        dask_scheduler.monitor.range_query(start=count0)))
    count1, series = q
    assert count1 >= count0 + 2, (count0, count1)
    assert {"cpu", "memory", "time", "num_fds", "host_net_io.read_bps", "host_net_io.write_bps"} <= set(series)
    assert len(series["memory"]) == count1 - count0
    assert all(m > 20e6 for m in series["memory"]), series["memory"]
    assert all(0 < n < 100_000 for n in series["num_fds"]), series["num_fds"]


def test_report_has_the_tabs_of_pythons(client, tmp_path):
    """The same block on distributed's own scheduler (same workers' kind,
    same Client code): both reports have the same tabs in the same order,
    and both task streams hold the block's tasks."""
    (tmp_path / "py").mkdir()
    with two_worker_cluster(tmp_path / "py", nthreads=2, scheduler=PyScheduler) as sched:
        with Client(sched.address, timeout=60) as pc:
            with performance_report(filename=str(tmp_path / "py.html")):
                compute(pc, "py")
    with performance_report(filename=str(tmp_path / "go.html")):
        compute(client, "go")
    py, go = (tmp_path / "py.html").read_text(), (tmp_path / "go.html").read_text()
    assert document_titles(go) == document_titles(py), (document_titles(go), document_titles(py))
    assert len(document_titles(go)) == 9
    for kind, html in (("py", py), ("go", go)):
        keys = document_keys(html)
        assert {f"reportinc-{kind}-{i}" for i in range(60)} <= keys, (kind, sorted(keys)[:5])
