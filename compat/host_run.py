"""run_on_scheduler and forwarded ops in the scheduler-side Python host.

run_function follows distributed.worker.run (which Scheduler.run_function
calls): the function, args and kwargs arrive pickled; ``dask_scheduler`` is
passed when the function takes it; a coroutine function is awaited (or,
with wait=False, started and left running); an exception answers
distributed.core.error_message, which Client._run_on_scheduler raises.

One difference, on purpose: distributed runs a plain function on its event
loop, so one that sleeps holds the whole scheduler. Here it runs in a
thread of its own and holds only its caller; a coroutine function runs on
the host's loop, as in distributed.

A forwarded op is an op Go does not know that a handler in
``dask_scheduler.handlers`` serves (distributed.core.Server._handle_comm):
called with a stand-in comm first when it expects one, awaited when it
returns a coroutine; a plain handler runs on the loop, as in distributed.
"""

from __future__ import annotations

import asyncio
import inspect
import threading

import host
from host_scheduler import scheduler

_background: set = set()  # wait=False coroutines, kept referenced


def _in_thread(fn, *args, **kwargs):
    """Run fn in a new daemon thread; a future for its result."""
    fut = host.loop.create_future()

    def done(ok, value):
        if fut.cancelled():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def run():
        # code written for distributed's event loop thread finds the host's
        # loop (IOLoop.current(), asyncio.get_event_loop()); only its
        # thread-safe calls (add_callback, call_soon_threadsafe) are safe
        # from here
        asyncio.set_event_loop(host.loop)
        try:
            r = fn(*args, **kwargs)
        except BaseException as e:  # noqa: B036 - delivered to the caller
            host.loop.call_soon_threadsafe(done, False, e)
        else:
            host.loop.call_soon_threadsafe(done, True, r)

    threading.Thread(target=run, name=f"run_on_scheduler-{getattr(fn, '__name__', 'function')}", daemon=True).start()
    return fut


@host.request("run_function")
async def run_function(msg):
    from distributed.core import error_message
    from distributed.protocol import pickle
    from distributed.protocol.serialize import to_serialize
    from distributed.utils import has_arg, iscoroutinefunction

    function = pickle.loads(msg["function"])
    wait = msg.get("wait", True)
    is_coro = iscoroutinefunction(function)
    args = pickle.loads(msg["args"]) if msg.get("args") else ()
    kwargs = pickle.loads(msg["kwargs"]) if msg.get("kwargs") else {}
    if not (wait or is_coro):
        raise AssertionError("Combination not supported")
    if has_arg(function, "dask_scheduler"):
        kwargs["dask_scheduler"] = scheduler
    try:
        if not is_coro:
            result = await _in_thread(function, *args, **kwargs)
        elif wait:
            result = await function(*args, **kwargs)
        else:
            task = asyncio.ensure_future(function(*args, **kwargs))
            _background.add(task)
            task.add_done_callback(_background.discard)
            result = None
    except Exception as e:
        host.logger.warning("Run Failed\nFunction: %s", getattr(function, "__name__", function), exc_info=True)
        return error_message(e)
    return {"status": "OK", "result": to_serialize(result)}


class HostComm:
    """What a forwarded handler gets as its comm: the caller's address.
    The host cannot write to the caller's connection (Go owns it)."""

    def __init__(self, peer):
        self.peer_address = peer
        self.name = "dask-go-scheduler forwarded op"

    def __getattr__(self, name):
        raise AttributeError(
            f"dask-go-scheduler forwards the op's arguments and reply only; the comm has no {name!r}"
        )


@host.request("handler")
async def forwarded(msg):
    """A forwarded op: msg["name"], msg["args"] (the request's keyword
    arguments), msg["peer"]. The answer's "result" is the handler's return
    value, which Go writes to the caller as its reply."""
    from distributed.core import _expects_comm

    name = msg["name"]
    handler = scheduler.handlers.get(name)
    if handler is None:
        raise KeyError(f"no handler {name!r} in dask_scheduler.handlers")
    args = dict(msg.get("args") or {})
    if _expects_comm(handler):
        result = handler(HostComm(msg.get("peer")), **args)
    else:
        result = handler(**args)
    if inspect.isawaitable(result):
        result = await result
    return {"result": result}


@host.message("stream")
def forwarded_stream(msg):
    """A stream op Go forwards (dask_scheduler.stream_handlers): called as
    distributed.core.Server.handle_stream calls it, with the op's fields and
    the stream's "client" or "worker"."""
    name = msg["name"]
    handler = scheduler.stream_handlers.get(name)
    if handler is None:
        host.logger.warning("host: no stream handler %r", name)
        return
    kwargs = {k: v for k, v in (msg.get("msg") or {}).items() if k != "op"}
    for extra in ("client", "worker"):
        if extra in msg:
            kwargs[extra] = msg[extra]
    result = handler(**kwargs)
    if inspect.isawaitable(result):
        task = asyncio.ensure_future(result)
        _background.add(task)
        task.add_done_callback(_background.discard)
