"""Progress bars from a stock Client against stock workers: distributed's
progress(), TextProgressBar, a ProgressBar subclass, MultiProgressBar and
the notebook widgets (ipywidgets, no browser: the widgets' values are read
back), all through the scheduler's feed op. Where the answer is
deterministic (the last message a bar reads) the same bar runs on
distributed's own scheduler with the same workers and the two are
compared. A feed that fails answers one final message and closes; a feed
with closures of its own runs in the scheduler-side Python host."""

from __future__ import annotations

import asyncio
import contextlib
import io
import pickle
import re
import time

import pytest
from distributed import Client, progress
from distributed.core import CommClosedError, clean_exception, connect
from distributed.diagnostics.progressbar import MultiProgressBar, ProgressBar, TextProgressBar
from distributed.protocol.pickle import dumps

from cluster import GoScheduler, PyScheduler, two_worker_cluster

pytestmark = pytest.mark.timeout(300)

KINDS = ("py", "go")
SCHEDULERS = {"py": PyScheduler, "go": GoScheduler}


class Cluster:
    def __init__(self, sched: GoScheduler):
        self.sched = sched

    def client(self) -> Client:
        return Client(self.sched.address, timeout=60)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """A Python and a Go scheduler, each with two stock nanny workers."""
    with contextlib.ExitStack() as stack:
        started = {}
        for kind in KINDS:
            tmp = tmp_path_factory.mktemp(f"progress-{kind}")
            started[kind] = Cluster(stack.enter_context(two_worker_cluster(tmp, scheduler=SCHEDULERS[kind])))
        yield started


def slowinc(x, delay=0.01):
    time.sleep(delay)
    return x + 1


def total(xs):
    return sum(xs)


def fails(x):
    raise ZeroDivisionError(f"no progress past {x}")


def parity(key):
    """A custom group_by for MultiProgressBar: the key's number's parity."""
    return "odd" if int(key.rsplit("-", 1)[1]) % 2 else "even"


def graph200(c: Client, tag: str):
    """199 slow increments and their sum: 200 tasks, about 1 s on 2 workers."""
    incs = c.map(slowinc, range(199), key=[f"inc-{tag}-{i}" for i in range(199)])
    return c.submit(total, incs, key=f"total-{tag}"), incs


def percents(text: str) -> list[int]:
    return [int(p) for p in re.findall(r"\| (\d+)% Completed", text)]


def run_text_bar(c: Client, futures) -> tuple[TextProgressBar, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bar = TextProgressBar(futures, complete=True, interval="100ms")
    return bar, out.getvalue()


def test_text_progress_bar_reaches_100_percent(clusters):
    """TextProgressBar on a 200-task graph draws rising percentages up to
    100 % and reads the same last message as on distributed's scheduler."""
    last = {}
    for kind in KINDS:
        with clusters[kind].client() as c:
            tot, incs = graph200(c, f"text-{kind}")
            bar, text = run_text_bar(c, [tot])
            seen = percents(text)
            assert seen and seen[-1] == 100, f"{kind}: bar never reached 100 %: {text[-400:]!r}"
            assert any(0 < p < 100 for p in seen), f"{kind}: no intermediate update: {seen}"
            assert seen == sorted(seen), f"{kind}: percentages went back: {seen}"
            assert tot.result() == sum(range(1, 200))
            last[kind] = bar._last_response
    assert last["go"] == {"all": 200, "remaining": 0, "status": "finished"}
    assert last["go"] == last["py"]


def test_progress_function_in_the_console(clusters):
    """distributed.progress(futures) blocks until done and prints 100 %."""
    with clusters["go"].client() as c:
        incs = c.map(slowinc, range(100), key=[f"console-{i}" for i in range(100)])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            progress(incs, notebook=False)
        assert all(f.status == "finished" for f in incs)
        assert percents(out.getvalue())[-1] == 100, out.getvalue()[-400:]


class RecordingBar(ProgressBar):
    """A ProgressBar subclass that keeps what it is asked to draw."""

    def __init__(self, keys, **kwargs):
        super().__init__(keys, **kwargs)
        self.draws = []
        self.stopped = None

    def _draw_bar(self, remaining, all, **kwargs):
        self.draws.append((all, remaining, kwargs.get("status")))

    def _draw_stop(self, **kwargs):
        self.stopped = kwargs


def test_progress_bar_subclass_completes(clusters):
    """A ProgressBar subclass gets draws with falling remaining counts and
    its _draw_stop with status finished (it used to wait forever)."""
    for kind in KINDS:
        with clusters[kind].client() as c:
            tot, _ = graph200(c, f"sub-{kind}")
            bar = RecordingBar([tot], complete=True, interval="50ms")
            c.sync(bar.listen, callback_timeout=120)
            assert bar.stopped is not None, f"{kind}: never stopped"
            assert bar.stopped["status"] == "finished", bar.stopped
            remaining = [r for _, r, _ in bar.draws]
            assert remaining == sorted(remaining, reverse=True), remaining
            assert bar.draws[-1] == (200, 0, "finished"), bar.draws[-3:]
            assert len(bar.draws) > 2, f"{kind}: {bar.draws}"


class RecordingMultiBar(MultiProgressBar):
    """MultiProgressBar leaves drawing to subclasses: this one keeps the
    messages."""

    def _draw_bar(self, **kwargs):
        self.draws = getattr(self, "draws", []) + [kwargs]


def test_multi_progress_bar_matches_python(clusters):
    """MultiProgressBar grouped by key prefix and by a function: the last
    message ({"all": {group: n}, "remaining": {group: 0}, "status"}) equals
    distributed's."""
    last = {}
    for kind in KINDS:
        with clusters[kind].client() as c:
            tot, incs = graph200(c, "multi")  # the same keys on both: groups are named after them
            bars = {"prefix": RecordingMultiBar([tot], complete=True, interval="50ms"),
                    "parity": RecordingMultiBar(incs, complete=True, group_by=parity, interval="50ms")}
            for bar in bars.values():
                c.sync(bar.listen, callback_timeout=120)
            last[kind] = {name: bar._last_response for name, bar in bars.items()}
    assert last["go"]["prefix"] == {"all": {"inc-multi": 199, "total-multi": 1},
                                    "remaining": {"inc-multi": 0, "total-multi": 0}, "status": "finished"}
    assert last["go"]["parity"] == {"all": {"even": 100, "odd": 99}, "remaining": {"even": 0, "odd": 0},
                                    "status": "finished"}
    assert last["go"] == last["py"]


async def show_widget(widget, timeout=120):
    """What a notebook does with progress(..., notebook=True)'s widget:
    _ipython_display_ starts its listen on the running loop; then wait
    until the feed has ended."""
    with contextlib.redirect_stdout(io.StringIO()):  # display() prints the repr outside IPython
        widget._ipython_display_()
    deadline = time.monotonic() + timeout
    while getattr(widget, "status", None) not in ("finished", "error"):
        assert time.monotonic() < deadline, "the widget got no final message"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)  # _draw_stop runs right after the status is set


def test_notebook_widgets_reach_their_maximum(clusters):
    """progress(x, notebook=True): every bar of the MultiProgressWidget and
    the single ProgressWidget's bar reach their max, styled success, with
    "n / n" beside them."""
    with clusters["go"].client() as c:
        tot, incs = graph200(c, "widget")
        multi = progress(tot, notebook=True)
        asyncio.run(show_widget(multi))
        assert set(multi.bars) == {"inc-widget", "total-widget"}
        for name, bar in multi.bars.items():
            assert bar.value == bar.max == 1.0, (name, bar.value, bar.max)
            assert bar.bar_style == "success", (name, bar.bar_style)
        assert "199 / 199" in multi.bar_texts["inc-widget"].value
        assert "Finished" in multi.elapsed_time.value

        more = c.map(slowinc, range(50), key=[f"single-{i}" for i in range(50)])
        single = progress(more, notebook=True, multi=False)
        asyncio.run(show_widget(single))
        assert single.bar.value == single.bar.max == 1.0
        assert single.bar.bar_style == "success"
        assert "50 / 50" in single.bar_text.value


def test_erred_task_shows_as_erred(clusters):
    """A task that raises ends the bar with status error naming its key and
    exception, as on distributed's scheduler; the widget shows the
    exception in red."""
    last = {}
    for kind in KINDS:
        with clusters[kind].client() as c:
            incs = c.map(slowinc, range(20), key=[f"pre-{kind}-{i}" for i in range(20)])
            bad = c.submit(fails, incs, key=f"fails-{kind}")
            bar, _ = run_text_bar(c, [bad])
            resp = dict(bar._last_response)
            assert resp["status"] == "error", resp
            _, exc, _ = clean_exception(resp.pop("exception"))
            assert isinstance(exc, ZeroDivisionError), exc
            last[kind] = resp
            if kind == "go":
                widget = progress(bad, notebook=True, multi=False)
                asyncio.run(show_widget(widget))
                assert widget.bar.bar_style == "danger"
                assert "ZeroDivisionError" in widget.elapsed_time.value, widget.elapsed_time.value
    assert last["go"]["key"] == "fails-go"
    assert last["go"]["all"] == last["py"]["all"] == 21
    assert last["go"]["remaining"] == last["py"]["remaining"]


async def raw_feed(address: str, **msg):
    """Open a feed by hand; returns the messages read until the scheduler
    closed the comm (or fails the test after a timeout)."""
    comm = await connect(address)
    try:
        await comm.write({"op": "feed", **msg})
        got = []
        while True:
            try:
                got.append(await asyncio.wait_for(comm.read(), 30))
            except CommClosedError:
                return got
    finally:
        comm.abort()


def test_garbage_closures_get_an_error_and_the_comm_closes(clusters):
    """Closures that do not unpickle: one final message with status error
    and the unpickling exception, then the scheduler closes the comm."""
    got = asyncio.run(raw_feed(clusters["go"].sched.address, setup=b"not a pickle",
                               function=b"nor this", interval=0.1))
    assert len(got) == 1, got
    msg = got[0]
    assert msg["status"] == "error"
    _, exc, _ = clean_exception(msg["exception"])
    assert isinstance(exc, pickle.UnpicklingError), msg


def test_multi_progress_group_by_raising_gets_an_error(clusters):
    """A custom group_by that raises: the bar reads one error message in its
    own shape and stops."""
    with clusters["go"].client() as c:
        incs = c.map(slowinc, [1, 2], key=["not-a-number-x", "not-a-number-y"])
        bar = RecordingMultiBar(incs, complete=True, group_by=parity, interval="50ms")
        c.sync(bar.listen, callback_timeout=60)
        resp = bar._last_response
        assert resp["status"] == "error" and resp["all"] == {} and resp["remaining"] == {}, resp
        _, exc, _ = clean_exception(resp["exception"])
        assert isinstance(exc, ValueError), exc


def feed_setup(scheduler):
    return {"calls": 0}


def feed_function(scheduler, state):
    state["calls"] += 1
    return {"calls": state["calls"], "tasks": len(scheduler.tasks), "workers": len(scheduler.workers)}


def feed_teardown(scheduler, state):
    scheduler.log_event("feed-test", {"torn-down-after": state["calls"]})


def feed_raises(scheduler):
    raise KeyError("nothing to feed")


async def read_feed(address: str, n: int, **msg):
    """Open a feed, read n messages, hang up."""
    comm = await connect(address)
    try:
        await comm.write({"op": "feed", **msg})
        return [await asyncio.wait_for(comm.read(), 30) for _ in range(n)]
    finally:
        await comm.close()


def test_generic_feed_runs_in_the_host(clusters):
    """A feed with closures of its own runs them in the scheduler-side
    Python host against dask_scheduler: setup once, the function every
    interval with the state, the teardown when the client hangs up."""
    with clusters["go"].client() as c:
        futs = c.map(slowinc, range(5), key=[f"generic-{i}" for i in range(5)])
        c.gather(futs)
        got = asyncio.run(read_feed(c.scheduler.address, 3, setup=dumps(feed_setup),
                                    function=dumps(feed_function), teardown=dumps(feed_teardown),
                                    interval="50ms"))
        assert [m["calls"] for m in got] == [1, 2, 3], got
        assert all(m["tasks"] >= 5 and m["workers"] == 2 for m in got), got
        deadline = time.monotonic() + 30
        while not c.get_events("feed-test"):
            assert time.monotonic() < deadline, "the teardown never ran"
            time.sleep(0.1)
        (_, event), = c.get_events("feed-test")
        assert event["torn-down-after"] >= 3


def test_generic_feed_that_raises_answers_the_exception_and_closes(clusters):
    got = asyncio.run(raw_feed(clusters["go"].sched.address, function=dumps(feed_raises), interval=0.1))
    assert len(got) == 1 and got[0]["status"] == "error", got
    _, exc, _ = clean_exception(got[0]["exception"])
    assert isinstance(exc, KeyError) and "nothing to feed" in str(exc), exc


def test_a_bar_that_hangs_up_leaves_nothing_behind(clusters):
    """A client that closes its feed before the computation ends (a
    notebook cell re-run) ends the feed: the engine drops its watch, and
    the computation goes on."""
    with clusters["go"].client() as c:
        incs = c.map(slowinc, range(40), delay=0.1, key=[f"hangup-{i}" for i in range(40)])
        bar = RecordingBar(incs, complete=True, interval="50ms")

        async def two_draws_then_hang_up():
            task = asyncio.ensure_future(bar.listen())
            while len(bar.draws) < 2:
                await asyncio.sleep(0.02)
            open_now = (await c.scheduler.identity())["daskgo"]["footprint"]["progress_watches"]
            assert open_now == 1, open_now
            bar.comm.abort()
            with contextlib.suppress(Exception):
                await task

        c.sync(two_draws_then_hang_up)
        assert bar.stopped is None and bar.draws[-1][1] > 0, bar.draws
        watches = lambda: c.sync(c.scheduler.identity)["daskgo"]["footprint"]["progress_watches"]  # noqa: E731
        deadline = time.monotonic() + 10
        while watches() != 0:
            assert time.monotonic() < deadline, "the watch outlived its feed"
            time.sleep(0.1)
        assert c.gather(incs) == list(range(1, 41))


def test_multi_progress_by_spans_matches_python(clusters):
    """group_by="spans": one bar per span, named (", ".join(span name),
    span id), with the same names and counts as on distributed's
    scheduler."""
    from distributed import span

    last = {}
    for kind in KINDS:
        with clusters[kind].client() as c:
            with span("outer", "prep") as prep:
                incs = c.map(slowinc, range(30), key=[f"spanned-{i}" for i in range(30)])
            with span("sum") as summed:
                tot = c.submit(total, incs, key="spanned-total")
            bar = RecordingMultiBar([tot], complete=True, group_by="spans", interval="50ms")
            c.sync(bar.listen, callback_timeout=120)
            resp = bar._last_response
            assert resp["status"] == "finished", resp
            assert set(resp["all"]) == {("outer, prep", prep), ("sum", summed)}, resp["all"]
            last[kind] = {name: n for (name, _), n in resp["all"].items()}
    assert last["go"] == last["py"] == {"outer, prep": 30, "sum": 1}
