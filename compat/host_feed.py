"""Generic feeds (Scheduler.feed) in the scheduler-side Python host.

distributed's progress bars never come here: the Go scheduler runs their
Progress / MultiProgress itself (scheduler/server/feed.go). Any other feed
carries arbitrary pickled setup / function / teardown callables that expect
the Scheduler: they run here against ``dask_scheduler``, as Scheduler.feed
runs them, with Go keeping the time and the client's comm:

    feed_open  {"setup", "function", "teardown"}  -> {"feed": id}
               (setup(scheduler) is called, and awaited when it returns an
               awaitable; its result is the feed's state)
    feed_next  {"feed"} -> {"result": function(scheduler[, state])}
    feed_close {"feed"} -> {} (teardown(scheduler, state), when given)

A plain callable runs in a thread (run_function's rule here: one that
blocks holds only its own feed); what it returns, when awaitable, is
awaited on the loop. A result must be what distributed can write on a
comm; one that is not answers an error, which ends the feed.
"""

from __future__ import annotations

import inspect
import itertools

import host
from host_run import _in_thread
from host_scheduler import scheduler

_feeds: dict = {}  # id -> [function, teardown, state]
_ids = itertools.count(1)


async def _call(fn, *args):
    r = await _in_thread(fn, *args)
    if inspect.isawaitable(r):
        r = await r
    return r


def _loads(msg, name):
    from distributed.protocol import pickle

    b = msg.get(name)
    return pickle.loads(b) if b else None


@host.request("feed_open")
async def feed_open(msg):
    function, setup, teardown = _loads(msg, "function"), _loads(msg, "setup"), _loads(msg, "teardown")
    if function is None:
        raise ValueError("feed: no function")
    state = await _call(setup, scheduler) if setup is not None else None
    fid = next(_ids)
    _feeds[fid] = [function, teardown, state]
    return {"feed": fid}


@host.request("feed_next")
async def feed_next(msg):
    from distributed.protocol import dumps

    function, _, state = _feeds[msg["feed"]]
    result = await _call(function, scheduler) if state is None else await _call(function, scheduler, state)
    dumps({"result": result})  # what the client's comm can carry, or raise here
    return {"result": result}


@host.request("feed_close")
async def feed_close(msg):
    f = _feeds.pop(msg.get("feed"), None)
    if f is not None and f[1] is not None:
        await _call(f[1], scheduler, f[2])
    return {}
