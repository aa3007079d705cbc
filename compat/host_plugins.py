"""Scheduler plugins and preloads in dask-go-scheduler's Python host.

Loaded by the host core (host.py) as one of its modules. What it adds:

- ``dask_scheduler.plugins`` becomes a dict that tells Go, after every
  change, the plugins' names and which hooks they define ("plugins"
  message); Go turns the engine's hook events on for exactly those hooks,
  so no event flows while nothing listens. ``add_plugin`` /
  ``remove_plugin`` are distributed's (Scheduler.add_plugin, remove_plugin).
- requests ``register_scheduler_plugin`` / ``unregister_scheduler_plugin``
  (Scheduler.register_scheduler_plugin: loads the client's dumps(plugin),
  idempotent by name, awaits plugin.start(scheduler) before adding it);
- request ``hooks``: a batch of engine events, in the engine's order, each
  called on every plugin that defines the hook with distributed's signature
  (SchedulerPlugin in distributed/diagnostics/plugin.py). A hook that raises
  is logged, as distributed logs it, and changes nothing else. A coroutine
  returned by add_worker / remove_worker is scheduled, not awaited before the
  next event: the Go scheduler never waits for a plugin.
- request ``preload``: distributed.preloading's Preload objects for
  ``--preload`` / ``distributed.scheduler.preload``, with their click options
  checked as ``dask scheduler`` checks them (validate_preload_argv), then
  ``dask_setup(scheduler)``; ``dask_teardown`` and the plugins' close() run
  when the host closes.

Event wire (a list per event, built by scheduler/server/hooks_wire.go):

    ["transition", stimulus_id, key, start, finish, kwargs or None]
    ["update_graph", stimulus_id, client, keys, tasks, priorities, annotations]
    ["add_worker" | "remove_worker", stimulus_id, worker]
    ["add_client" | "remove_client", stimulus_id, client]
    ["restart", stimulus_id]
    ["log_event", stimulus_id, topic, msg]
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import warnings

import host
from host_scheduler import HostScheduler, scheduler

logger = logging.getLogger("distributed.scheduler")

HOOKS = ("transition", "update_graph", "add_worker", "remove_worker", "add_client",
         "remove_client", "restart", "log_event")


def _defines(plugin, hook):
    """Whether plugin's class overrides SchedulerPlugin's no-op hook (or is
    not a SchedulerPlugin and has it)."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    fn = getattr(type(plugin), hook, None)
    if fn is None:
        return callable(getattr(plugin, hook, None))
    return fn is not getattr(SchedulerPlugin, hook, None)


class _Plugins(dict):
    """Scheduler.plugins that keeps, per hook, the bound methods to call and
    tells Go which hooks are listened to after every change."""

    def __init__(self):
        super().__init__()
        self.calls = {h: [] for h in HOOKS}
        self.seq = 0

    def state(self):
        """What Go keeps: the names, and the hooks some plugin defines;
        seq orders the reports (Go applies none older than one it has)."""
        return {"names": [str(n) for n in self.keys()], "hooks": [h for h in HOOKS if self.calls[h]],
                "seq": self.seq}

    def _changed(self):
        self.seq += 1
        self.calls = {h: [(n, getattr(p, h)) for n, p in self.items() if _defines(p, h)] for h in HOOKS}
        try:
            host.post_go("plugins", **self.state())
        except Exception:
            logger.exception("host: cannot tell the scheduler about its plugins")

    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        self._changed()

    def __delitem__(self, k):
        super().__delitem__(k)
        self._changed()

    def pop(self, *a):
        r = super().pop(*a)
        self._changed()
        return r

    def update(self, *a, **kw):
        super().update(*a, **kw)
        self._changed()

    def clear(self):
        super().clear()
        self._changed()


scheduler.__dict__["plugins"] = _Plugins()


def add_plugin(self, plugin, *, idempotent=False, name=None):
    """Scheduler.add_plugin."""
    from distributed.diagnostics.plugin import _get_plugin_name

    if name is None:
        name = _get_plugin_name(plugin)
    if name in self.plugins:
        if idempotent:
            return
        warnings.warn(f"Scheduler already contains a plugin with name {name}; overwriting.", category=UserWarning)
    self.plugins[name] = plugin


def remove_plugin(self, name=None):
    """Scheduler.remove_plugin."""
    try:
        del self.plugins[name]
    except KeyError:
        raise ValueError(f"Could not find plugin {name!r} among the current scheduler plugins") from None


HostScheduler.add_plugin = add_plugin
HostScheduler.remove_plugin = remove_plugin


@host.request("register_scheduler_plugin")
async def _register(msg):
    """Scheduler.register_scheduler_plugin."""
    from distributed.diagnostics.plugin import SchedulerPlugin, _get_plugin_name
    from distributed.protocol.pickle import loads

    plugin, name, idempotent = msg.get("plugin"), msg.get("name"), bool(msg.get("idempotent"))
    if not isinstance(plugin, SchedulerPlugin):
        plugin = loads(plugin)
        if not isinstance(plugin, SchedulerPlugin):
            raise TypeError(f"register_scheduler_plugin: expected a SchedulerPlugin, got {type(plugin).__name__}")
    if name is None:
        name = _get_plugin_name(plugin)
    if name in scheduler.plugins and idempotent:
        return {"result": scheduler.plugins.state()}
    if hasattr(plugin, "start"):
        result = plugin.start(scheduler)
        if inspect.isawaitable(result):
            await result
    scheduler.add_plugin(plugin, name=name, idempotent=idempotent)
    return {"result": scheduler.plugins.state()}


@host.request("unregister_scheduler_plugin")
async def _unregister(msg):
    """Scheduler.unregister_scheduler_plugin: removes it, without close()."""
    scheduler.remove_plugin(msg.get("name"))
    return {"result": scheduler.plugins.state()}


# ---- hook events ---------------------------------------------------------------

_dropped = 0  # events Go dropped because the host fell behind


def _failed(name, hook):
    logger.info("Plugin failed with exception", exc_info=True)


def _schedule(result):
    if result is not None and inspect.isawaitable(result):
        task = asyncio.ensure_future(result)
        task.add_done_callback(_log_task)


def _log_task(task):
    if not task.cancelled() and task.exception() is not None:
        logger.exception(task.exception(), exc_info=task.exception())


@host.request("hooks")
async def _hooks_request(msg):
    """A batch of events; answered once every hook ran (Go's pump sends the
    next batch then: one in flight)."""
    _hooks(msg)
    return {}


def _hooks(msg):
    global _dropped
    dropped = msg.get("dropped") or 0
    if dropped > _dropped:
        logger.warning("dask-go-scheduler: the scheduler dropped %d plugin events in all: the plugins fell behind",
                       dropped)
        _dropped = dropped
    calls = scheduler.plugins.calls
    for ev in msg.get("events") or ():
        hook = ev[0]
        fns = calls.get(hook)
        if not fns:
            continue
        if hook == "transition":
            _, sid, key, start, finish, kw = ev
            kw = kw or {}
            for name, fn in fns:
                try:
                    fn(key, start, finish, stimulus_id=sid, **kw)
                except Exception:
                    _failed(name, hook)
        else:
            _call_other(hook, ev, fns)


def _call_other(hook, ev, fns):
    sid = ev[1]
    for name, fn in fns:
        try:
            if hook == "update_graph":
                _, _, client, keys, tasks, prios, annots = ev
                fn(scheduler, client=client, keys=set(keys), tasks=list(tasks),
                   annotations=_annotations(annots), priority=dict(zip(tasks, map(tuple, prios))),
                   stimulus_id=sid)
            elif hook == "add_worker":
                _fresh_workers()
                _schedule(fn(scheduler=scheduler, worker=ev[2]))
            elif hook == "remove_worker":
                _schedule(fn(scheduler=scheduler, worker=ev[2], stimulus_id=sid))
            elif hook in ("add_client", "remove_client"):
                fn(scheduler=scheduler, client=ev[2])
            elif hook == "restart":
                fn(scheduler)
            elif hook == "log_event":
                fn(ev[2], ev[3])
        except Exception as e:
            if hook in ("transition", "log_event"):
                _failed(name, hook)
            else:
                logger.exception(e)


def _fresh_workers():
    """A plugin's add_worker looks the worker up in scheduler.workers: the
    snapshot it reads must be newer than the event."""
    snap = scheduler.__dict__.get("_workers")
    if snap is not None:
        with snap.lock:
            snap.value = None


def _annotations(pairs):
    """[[key, {name: value}], ...] -> {name: {key: value}} (_update_graph's
    annotations_for_plugin)."""
    out = {}
    for key, values in pairs or ():
        for name, value in (values or {}).items():
            out.setdefault(name, {})[key] = value
    return out


# ---- preloads -----------------------------------------------------------------

_preloads = None


def _check_argv(names, argv):
    """distributed.preloading.validate_preload_argv, for the argv `dask
    scheduler` would hand to the preloads."""
    import click
    from distributed.preloading import _import_module, is_webaddress

    modules = {n: _import_module(n) for n in names if not is_webaddress(n)}
    commands = [m.dask_setup for m in modules.values() if isinstance(getattr(m, "dask_setup", None), click.Command)]
    if len(commands) > 1:
        raise click.UsageError(f"Multiple --preload modules with click-configurable setup: {list(modules)}")
    if argv and not commands:
        raise click.UsageError(f"Unknown argument specified: {argv!r} Was click-configurable --preload target provided?")
    if commands:
        ctx = click.Context(commands[0], allow_extra_args=False)
        commands[0].parse_args(ctx, list(argv))


@host.request("preload")
async def _preload(msg):
    """Scheduler.__init__'s process_preloads and start's preloads.start():
    an import or usage error is answered (the scheduler does not start); a
    dask_setup that raises is logged, as PreloadManager.start logs it."""
    global _preloads
    import click
    from distributed.preloading import process_preloads

    names = [str(n) for n in msg.get("names") or ()]
    argv = [str(a) for a in msg.get("argv") or ()]
    try:
        _check_argv(names, argv)
    except click.UsageError as e:
        raise ValueError(e.format_message()) from None
    _preloads = process_preloads(scheduler, names, argv)
    await _preloads.start()
    return {"result": scheduler.plugins.state()}


@host.on_close
async def _close():
    """Scheduler.close: preloads' teardown, then plugins' before_close and close."""
    if _preloads is not None:
        await _preloads.teardown()
    for hook in ("before_close", "close"):
        for plugin in list(scheduler.plugins.values()):
            fn = getattr(plugin, hook, None)
            if fn is None:
                continue
            try:
                r = fn()
                if inspect.isawaitable(r):
                    await r
            except Exception:
                logger.exception("Plugin %s failed", hook)


# ---- Scheduler members that preloads call ------------------------------------
# dask-gateway's preload (dask_gateway.scheduler_preload) is the model: it
# reads services["dashboard"].port, calls workers_to_close and
# adaptive_target synchronously, and looks its workers up in
# scheduler.workers from its add_worker hook.


class _Service:
    """A service as Scheduler.services holds it: here only its port."""

    def __init__(self, port):
        self.port = port

    def __repr__(self):
        return f"<service on port {self.port}>"


_services_added = {}  # services a preload set (scheduler.services["gateway"] = ...)


class _Services(dict):
    def __setitem__(self, k, v):
        _services_added[k] = v
        super().__setitem__(k, v)


def _services(self):
    """Scheduler.services: {name: server with .port} from Go's, plus the
    ones code here added."""
    raw = self._i("services") or {}
    out = _Services({k: (_Service(v) if isinstance(v, int) else v) for k, v in raw.items()})
    dict.update(out, _services_added)
    return out


HostScheduler.services = property(_services)


def _workers_to_close(self, memory_ratio=None, n=None, key=None, minimum=None, target=None, attribute="address"):
    """Scheduler.workers_to_close (a callable key cannot cross to Go)."""
    if key is not None:
        raise TypeError("dask-go-scheduler: workers_to_close(key=...) is not supported (a function cannot be sent to the Go scheduler)")
    args = {"memory_ratio": memory_ratio, "n": n, "minimum": minimum, "target": target, "attribute": attribute}
    return host.call_go("rpc", rpc_op="workers_to_close", args={k: v for k, v in args.items() if v is not None})


def _adaptive_target(self, target_duration=None):
    """Scheduler.adaptive_target."""
    args = {} if target_duration is None else {"target_duration": target_duration}
    return host.call_go("rpc", rpc_op="adaptive_target", args=args)


HostScheduler.workers_to_close = _workers_to_close
HostScheduler.adaptive_target = _adaptive_target
