"""dask-go-scheduler's scheduler-side Python host: the core.

The Go scheduler starts this process (same interpreter as the graph helpers,
``--python``) the first time something needs Python inside the scheduler:
``Client.run_on_scheduler``, a scheduler plugin, a preload, a handler that one
of them registered. Unlike the helpers it keeps state (plugins, extensions,
handlers, objects that run_on_scheduler functions leave behind), so it is one
process that lives until it dies or the scheduler stops.

The pipe. stdin and stdout carry dask-framed messages (u64 N, u64 nframes, u64
lengths, frames) made and read by distributed.protocol.dumps/loads, in both
directions. The framing is helper_wire.py's read_message/write_message, the
graph helpers' own, so the two kinds of process frame alike. Go installs
helper_wire right after this module, never before it: helper_wire imports
distributed, which must wait until fd 1 has moved aside (below); the
functions here import it when they run. (The working directory has left
sys.path before any module runs: proc_spawn.go's bootstrap.) Every message
is a dict with a "t":

    {"t": "req", "id", "op", ...}   a request; exactly one "ans" comes back
    {"t": "ans", "id", "status": "OK" | "error", ...}
    {"t": "msg", "op", ...}         one-way (events from Go, notices to Go)

Go numbers its requests 1, 2, 3...; the host numbers its own -1, -2, ... so
that the two never meet. The first message on stdout is the handshake,
{"t": "msg", "op": "hello", "wire": WIRE_VERSION, "pid"}.

Threads. The main thread runs the host's event loop (asyncio, wrapped by
tornado's IOLoop: ``dask_scheduler.loop``). A reader thread reads stdin: it
resolves answers to the host's own requests itself (so that a call to Go
from a thread, or even from a coroutine that blocks the loop, is answered)
and hands requests and one-way messages to the loop. Writes go through one
lock, from any thread. A request runs as its own task on the loop; a
run_on_scheduler function that is not a coroutine runs in a thread of its
own, so one that sleeps forever holds only its caller.

Adding a module (see /work/notes/host-api.md and compat/host.go): write
compat/host_NAME.py, ``import host`` in it and decorate its request handlers
with ``@host.request("op")`` (``async def handler(msg) -> dict``) and its
one-way message handlers with ``@host.message("op")``; list it in
compat/host.go's hostModules. The object code written for distributed works
against is ``host.scheduler`` (host_scheduler.py).

stdout carries only frames: fd 1 is moved to stderr before anything runs, so
a print in user code cannot corrupt the stream; stderr is logged by Go.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
import threading
import traceback

WIRE_VERSION = 1

logger = logging.getLogger("distributed.scheduler")

# ---- the pipe ----------------------------------------------------------------

_out = None  # the binary stream to Go (the original fd 1)
_in = None
_write_lock = threading.Lock()


def _setup_pipes():
    global _out, _in
    out_fd = os.dup(1)
    os.dup2(2, 1)  # prints go to stderr from now on
    sys.stdout = sys.stderr
    _out = os.fdopen(out_fd, "wb", buffering=0)
    _in = os.fdopen(os.dup(0), "rb", buffering=0)


_setup_pipes()  # first, before any module prints


def send(msg: dict) -> None:
    """Write one message to Go (any thread)."""
    from distributed.protocol import dumps
    from helper_wire import write_message

    frames = dumps(msg)
    with _write_lock:
        write_message(_out, frames)


# ---- handler registries --------------------------------------------------------

_requests: dict = {}  # op -> async def handler(msg) -> dict
_messages: dict = {}  # op -> def handler(msg) (sync, on the loop)


def request(op):
    """Decorator: ``async def handler(msg) -> dict`` answers Go's request op.
    The dict is the answer's body ("status" defaults to "OK"); an exception
    answers distributed's error_message for it."""

    def deco(fn):
        _requests[op] = fn
        return fn

    return deco


def message(op):
    """Decorator: ``def handler(msg)`` receives Go's one-way message op on
    the loop. An exception is logged and changes nothing else."""

    def deco(fn):
        _messages[op] = fn
        return fn

    return deco


# ---- calls to Go -----------------------------------------------------------------

_ids = itertools.count(1)
_waiting: dict = {}  # id -> [threading.Event, answer]
_waiting_lock = threading.Lock()
_closed = threading.Event()


class GoError(RuntimeError):
    """Go answered a host request with an error."""


def call_go(op: str, timeout: float | None = 60, **kwargs):
    """Ask Go for op and wait for its answer (any thread). Blocking the
    loop is allowed: the reader thread answers, not the loop."""
    rid = -next(_ids)
    ev = threading.Event()
    slot = [ev, None]
    with _waiting_lock:
        if _closed.is_set():
            raise GoError("the scheduler closed the host's pipe")
        _waiting[rid] = slot
    try:
        send({"t": "req", "id": rid, "op": op, **kwargs})
        if not ev.wait(timeout):
            raise TimeoutError(f"no answer from the scheduler to {op!r} in {timeout} s")
    finally:
        with _waiting_lock:
            _waiting.pop(rid, None)
    ans = slot[1]
    if ans is None:
        raise GoError(f"the scheduler closed the host's pipe before answering {op!r}")
    if ans.get("status") != "OK":
        raise GoError(ans.get("error") or ans.get("exception_text") or f"{op} failed")
    return ans.get("result")


async def acall_go(op: str, timeout: float | None = 60, **kwargs):
    """call_go without blocking the loop."""
    return await asyncio.get_running_loop().run_in_executor(None, lambda: call_go(op, timeout, **kwargs))


def post_go(op: str, **kwargs) -> None:
    """A one-way message to Go (any thread)."""
    send({"t": "msg", "op": op, **kwargs})


# ---- the loop --------------------------------------------------------------------

loop: asyncio.AbstractEventLoop | None = None
_tasks: set = set()  # requests running, kept referenced


def _answer(rid, body):
    body = dict(body or {})
    body.setdefault("status", "OK")
    send({**body, "t": "ans", "id": rid})


def _error_answer(rid, e):
    from distributed.core import error_message

    _answer(rid, error_message(e))


async def _serve_request(msg):
    rid = msg.get("id")
    op = msg.get("op")
    fn = _requests.get(op)
    try:
        if fn is None:
            raise ValueError(f"the scheduler's Python host has no handler for {op!r}")
        body = await fn(msg)
    except Exception as e:  # answered to Go, which tells the caller
        _error_answer(rid, e)
        return
    try:
        _answer(rid, body)
    except Exception as e:  # e.g. a result that cannot be serialized
        logger.warning("host: answer to %r failed: %s", op, e)
        _error_answer(rid, e)


generation = 0  # bumped by every request and message from Go (host_scheduler's snapshots)


# One-way messages waiting for the loop, at most: past it they are dropped
# and counted, never queued without bound (the reader thread must not
# block: it also reads the answers a blocked loop may be waiting for).
MAX_QUEUED_MESSAGES = 10000
_queued_messages = 0
_dropped_messages = 0
_queue_lock = threading.Lock()


def _admit_message():
    global _queued_messages, _dropped_messages
    with _queue_lock:
        if _queued_messages >= MAX_QUEUED_MESSAGES:
            _dropped_messages += 1
            if _dropped_messages % 1000 == 1:
                logger.warning("host: the loop is behind; %d messages from the scheduler dropped", _dropped_messages)
            return False
        _queued_messages += 1
        return True


def _dispatch(msg):
    global generation, _queued_messages
    generation += 1  # what Go sends may follow a change: snapshots taken before are stale
    t = msg.get("t")
    if t == "msg":
        with _queue_lock:
            _queued_messages -= 1
    if t == "req":
        task = loop.create_task(_serve_request(msg))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
    elif t == "msg":
        fn = _messages.get(msg.get("op"))
        if fn is None:
            logger.warning("host: no handler for message %r", msg.get("op"))
            return
        try:
            fn(msg)
        except Exception:
            logger.exception("host: message %r failed", msg.get("op"))


def _reader():
    from distributed.protocol import loads
    from helper_wire import read_message

    try:
        while True:
            frames = read_message(_in)
            if frames is None:
                break
            msg = loads(frames, deserializers=("dask", "pickle", "msgpack", "error"))
            if msg.get("t") == "ans":
                with _waiting_lock:
                    slot = _waiting.get(msg.get("id"))
                if slot is not None:
                    slot[1] = msg
                    slot[0].set()
                continue
            if msg.get("t") == "msg" and not _admit_message():
                continue
            loop.call_soon_threadsafe(_dispatch, msg)
    except Exception:
        traceback.print_exc()
    finally:
        _closed.set()
        with _waiting_lock:
            for slot in _waiting.values():
                slot[0].set()
        # EOF: the scheduler is gone or closing us; stop.
        loop.call_soon_threadsafe(loop.stop)


_on_close: list = []  # callables run when the pipe closes, before exit


def on_close(fn):
    """Run fn (sync or async) when the scheduler closes the host."""
    _on_close.append(fn)
    return fn


def main(modules=()):
    global loop
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s - %(levelname)s - %(message)s")
    from tornado.ioloop import IOLoop

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    IOLoop.current()  # the tornado wrapper distributed's code expects of scheduler.loop
    for name in modules:
        __import__(name)
    import uploads

    uploads.catch_up()  # a host started again imports what its predecessor had
    send({"t": "msg", "op": "hello", "wire": WIRE_VERSION, "pid": os.getpid()})
    threading.Thread(target=_reader, name="host-reader", daemon=True).start()
    try:
        loop.run_forever()
    finally:
        for fn in reversed(_on_close):
            try:
                r = fn()
                if asyncio.iscoroutine(r):
                    loop.run_until_complete(asyncio.wait_for(r, 5))
            except Exception:
                logger.exception("host: close hook failed")
    os._exit(0)  # threads left by user code must not keep the process alive
