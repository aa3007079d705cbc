"""The ``dask_scheduler`` object of the scheduler-side Python host.

Code written for distributed's Scheduler (run_on_scheduler functions,
scheduler plugins, extensions, preloads) gets this object where it expects
the Scheduler. Three kinds of members:

- read from Go (a snapshot on demand): tasks, workers, clients, address, id,
  status, memory, get_task_stream, get_logs, bandwidth figures. A snapshot
  is one call to Go, which copies the engine's state under its lock
  (scheduler.State.DumpState) and encodes it outside it; it is reused for
  SNAPSHOT_TTL seconds unless Go sent the host anything since (so a loop
  over ``tasks`` reads one copy, and a new run_on_scheduler call reads a
  new one), and it is never written back: setting a TaskState's attribute
  changes nothing in the scheduler;
- kept here: plugins, extensions, handlers, stream_handlers,
  periodic_callbacks, loop, and any attribute code sets on the object;
- sent to Go: log_event, retire_workers, close, register_worker_plugin /
  register_nanny_plugin and their unregister;
- upload_file: written to the local directory and imported here, and by the
  graph helpers before their next graph (uploads.py).

Anything else raises AttributeError naming it, with "dask-go-scheduler" in
the text (NOT_OFFERED lists the Scheduler members known to be missing).
``handlers[name] = f`` makes ``client.scheduler.name(...)`` reach f: Go
forwards an op it does not know to the host when the host has registered it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import host
import uploads

SNAPSHOT_TTL = 0.1  # seconds a snapshot is reused

# Scheduler members code may look for that this object does not offer, with
# what to use instead when there is something.
NOT_OFFERED = {
    "transitions": "the engine's transitions run in Go",
    "transition": "the engine's transitions run in Go",
    "stimulus_task_finished": "the engine runs in Go",
    "update_graph": "graphs go through Client.compute / submit",
    "validate_state": "the Go engine validates itself in its tests",
    "task_groups": "read tasks[key].group",
    "task_prefixes": "read tasks[key].prefix",
    "replicated_tasks": "not kept",
    "unrunnable": "not kept",
    "queued": "not kept",
    "saturated": "not kept",
    "idle": "not kept",
    "rpc": "the host has no connection pool: use a Client",
    "get_profile": "the scheduler has no Python event loop to profile",
}


class _NotifyingDict(dict):
    """A dict that tells Go its keys after every change (handlers and
    stream_handlers: Go forwards the ops it finds here)."""

    def __init__(self, kind):
        super().__init__()
        self._kind = kind

    def _changed(self):
        try:
            host.post_go("handlers", kind=self._kind, ops=sorted(str(k) for k in self.keys()))
        except Exception:
            host.logger.exception("host: cannot tell the scheduler about %s", self._kind)

    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        self._changed()

    def __delitem__(self, k):
        super().__delitem__(k)
        self._changed()

    def update(self, *a, **kw):
        super().update(*a, **kw)
        self._changed()

    def pop(self, *a):
        r = super().pop(*a)
        self._changed()
        return r

    def setdefault(self, k, v=None):
        r = super().setdefault(k, v)
        self._changed()
        return r

    def clear(self):
        super().clear()
        self._changed()


# ---- snapshot views ------------------------------------------------------------


class TaskPrefix:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<TaskPrefix {self.name}>"


class TaskGroup:
    __slots__ = ("name", "prefix")

    def __init__(self, name, prefix):
        self.name, self.prefix = name, prefix

    def __repr__(self):
        return f"<TaskGroup {self.name}>"


class TaskState:
    """A task as the engine held it at the snapshot (read-only in effect).
    Made when first looked up; its dependencies, dependents and workers are
    resolved when read."""

    __slots__ = (
        "key", "state", "nbytes", "priority", "group", "prefix", "annotations",
        "exception_text", "traceback_text", "exception", "traceback",
        "run_id", "retries", "erred_on", "exception_blame", "suspicious", "span_id",
        "actor", "who_wants", "_view", "_row", "__weakref__",
    )

    def __init__(self, view, row):
        self._view, self._row = view, row
        (self.key, self.state, self.nbytes, gname, pname, _, _, _, annotations,
         self.exception_text, self.traceback_text, self.priority, self.run_id, self.retries,
         self.erred_on, self.exception, self.traceback) = row
        self.group = view.group(gname, pname)
        self.prefix = self.group.prefix
        self.annotations = annotations or {}
        self.exception_blame = self.span_id = None
        self.suspicious, self.actor, self.who_wants = 0, False, set()

    @property
    def dependencies(self):
        return {self._view.at(i) for i in self._row[5]}

    @property
    def dependents(self):
        return self._view.dependents_of(self.key)

    @property
    def who_has(self):
        return {self._view.worker(i) for i in self._row[6]}

    @property
    def processing_on(self):
        i = self._row[7]
        return self._view.worker(i) if i is not None and i >= 0 else None

    @property
    def group_key(self):
        return self.group.name

    @property
    def has_lost_dependencies(self):
        return False

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return f"<TaskState {self.key!r} {self.state}>"


class WorkerState:
    """A worker as the engine held it at the snapshot."""

    def __init__(self, d, tasks_of):
        self.address = d["address"]
        self.name = d.get("name")
        self.nthreads = d.get("nthreads")
        self.memory_limit = d.get("memory_limit")
        self.metrics = d.get("metrics") or {}
        self.resources = d.get("resources") or {}
        self.used_resources = d.get("used_resources") or {}
        self.host = d.get("host")
        self.nanny = d.get("nanny")
        self.pid = d.get("pid")
        self.local_directory = d.get("local_directory")
        self.last_seen = d.get("last_seen")
        self.occupancy = d.get("occupancy")
        self.nbytes = d.get("nbytes")
        self.services = d.get("services") or {}
        self.extra = d.get("extra") or {}
        self.server_id = d.get("server_id")
        self._has_what, self._processing = d.get("has_what") or (), d.get("processing") or ()
        self._tasks_of = tasks_of
        self._memory = d.get("memory")
        try:
            from distributed.core import Status

            self.status = Status[d.get("status")]
        except Exception:
            self.status = d.get("status")

    @property
    def has_what(self):
        return self._tasks_of(self._has_what)

    @property
    def processing(self):
        return self._tasks_of(self._processing)

    @property
    def memory(self):
        return _memory_state(self._memory)

    def identity(self):
        return {"type": "Worker", "id": self.server_id, "host": self.host, "name": self.name,
                "nthreads": self.nthreads, "memory_limit": self.memory_limit,
                "last_seen": self.last_seen, "services": self.services, "metrics": self.metrics,
                "status": getattr(self.status, "name", self.status), "nanny": self.nanny}

    def __hash__(self):
        return hash(self.address)

    def __eq__(self, other):
        return getattr(other, "address", other) == self.address

    def __repr__(self):
        return f"<WorkerState {self.address!r}, name: {self.name}, status: {getattr(self.status, 'name', self.status)}>"


class ClientState:
    def __init__(self, d, tasks_of):
        self.client_key = d["id"]
        self.last_seen = d.get("last_seen")
        self._wants = d.get("wants_what") or ()
        self._tasks_of = tasks_of

    @property
    def wants_what(self):
        return self._tasks_of(self._wants)

    def __hash__(self):
        return hash(self.client_key)

    def __repr__(self):
        return f"<Client {self.client_key!r}>"


def _memory_state(m):
    from distributed.scheduler import MemoryState

    process, unmanaged_old, managed, spilled = m or (0, 0, 0, 0)
    return MemoryState(process=process, unmanaged_old=unmanaged_old, managed=managed, spilled=spilled)


class _Snapshot:
    """One part of the engine's state as Go copied it, reused for
    SNAPSHOT_TTL seconds and until Go sends the host anything (a request or
    an event may follow a change the copy does not have)."""

    def __init__(self, part, build):
        self.part, self.build = part, build
        self.lock = threading.Lock()
        self.value, self.at, self.gen = None, 0.0, -1

    def get(self):
        with self.lock:
            now = time.monotonic()
            if self.value is None or self.gen != host.generation or now - self.at > SNAPSHOT_TTL:
                gen = host.generation
                self.value = self.build(host.call_go("snapshot", part=self.part))
                self.at, self.gen = time.monotonic(), gen
            return self.value


class WorkerRef:
    """A worker named by a task (who_has, processing_on): its address, and
    the rest read from dask_scheduler.workers when asked for. Equal to the
    WorkerState of the same address."""

    __slots__ = ("address",)

    def __init__(self, address):
        self.address = address

    def __getattr__(self, name):
        ws = host.scheduler.workers.get(self.address)
        if ws is None:
            raise AttributeError(f"worker {self.address} is gone; no {name!r}")
        return getattr(ws, name)

    def __eq__(self, other):
        return getattr(other, "address", other) == self.address

    def __hash__(self):
        return hash(self.address)

    def __repr__(self):
        return f"<WorkerState {self.address!r}>"


def _ref(refs, address):
    r = refs.get(address)
    if r is None:
        r = refs[address] = WorkerRef(address)
    return r


class TaskView(Mapping):
    """dask_scheduler.tasks: key -> TaskState over one snapshot's rows.
    len, iteration and membership read the keys only; a TaskState is made
    when looked up (100k tasks: len() costs the decode, not 100k objects)."""

    def __init__(self, snap):
        self._rows = snap.get("tasks") or []
        self._workers = snap.get("workers") or []
        self._index = {r[0]: i for i, r in enumerate(self._rows)}
        self._objs = [None] * len(self._rows)
        self._groups, self._refs = {}, {}
        self._dependents = None

    def __len__(self):
        return len(self._rows)

    def __iter__(self):
        return iter(self._index)

    def __contains__(self, key):
        return key in self._index

    def __getitem__(self, key):
        return self.at(self._index[key])

    def at(self, i):
        ts = self._objs[i]
        if ts is None:
            ts = self._objs[i] = TaskState(self, self._rows[i])
        return ts

    def group(self, name, prefix):
        g = self._groups.get(name)
        if g is None:
            g = self._groups[name] = TaskGroup(name, TaskPrefix(prefix))
        return g

    def worker(self, i):
        return _ref(self._refs, self._workers[i])

    def dependents_of(self, key):
        if self._dependents is None:
            deps = {}
            for i, r in enumerate(self._rows):
                for j in r[5]:
                    deps.setdefault(j, []).append(i)
            self._dependents = deps
        return {self.at(i) for i in self._dependents.get(self._index[key], ())}


class HostScheduler:
    """The object code written for distributed's Scheduler works against."""

    def __init__(self):
        d = self.__dict__
        d["handlers"] = _NotifyingDict("handlers")
        d["stream_handlers"] = _NotifyingDict("stream_handlers")
        d["plugins"] = {}
        d["extensions"] = {}
        d["periodic_callbacks"] = {}
        d["_tasks"] = _Snapshot("tasks", TaskView)
        d["_workers"] = _Snapshot("workers", self._build_workers)
        d["_clients"] = _Snapshot("clients", self._build_clients)
        d["_info"] = _Snapshot("info", lambda s: s)

    # -- kept here
    @property
    def loop(self):
        from tornado.ioloop import IOLoop

        return IOLoop.current() if threading.current_thread() is threading.main_thread() else _main_ioloop()

    # -- read from Go
    def _tasks_of(self, keys):
        tasks = self.tasks
        return {tasks[k] for k in keys if k in tasks}

    def _build_workers(self, snap):
        return {w["address"]: WorkerState(w, self._tasks_of) for w in snap.get("workers") or []}

    def _build_clients(self, snap):
        return {c["id"]: ClientState(c, self._tasks_of) for c in snap.get("clients") or []}

    @property
    def tasks(self):
        return self._tasks.get()

    @property
    def workers(self):
        return self._workers.get()

    @property
    def clients(self):
        return self._clients.get()

    @property
    def running(self):
        from distributed.core import Status

        return {ws for ws in self.workers.values() if ws.status == Status.running}

    def _i(self, k, default=None):
        return self._info.get().get(k, default)

    @property
    def address(self):
        return self._i("address")

    @property
    def id(self):
        return self._i("id")

    @property
    def status(self):
        from distributed.core import Status

        return Status[self._i("status", "running")]

    @property
    def services(self):
        return self._i("services") or {}

    @property
    def time_started(self):
        return self._i("started")

    @property
    def total_nthreads(self):
        return self._i("total_nthreads", 0)

    @property
    def total_occupancy(self):
        return self._i("total_occupancy", 0.0)

    @property
    def memory(self):
        return _memory_state(self._i("memory"))

    @property
    def bandwidth(self):
        return self._i("bandwidth", 0)

    @property
    def bandwidth_workers(self):
        return dict(self._i("bandwidth_workers") or {})

    @property
    def bandwidth_types(self):
        return dict(self._i("bandwidth_types") or {})

    @property
    def local_directory(self):
        return uploads.local_directory()

    async def upload_file(self, filename, data, load=True):
        """distributed's own core.Server.upload_file on this object (it reads
        only local_directory; SchedulerUploadFile.start calls it), then the
        manifest that makes the helpers import the file too (uploads.py)."""
        where = uploads.local_directory()
        if where is None:
            raise RuntimeError("dask-go-scheduler has no local directory to upload files to")
        uploads.on_path(where)
        from distributed.core import Server

        # an import error is the client's: register_plugin raises it
        answer = await Server.upload_file(self, filename, data, load=load)
        if load:
            uploads.record(filename)
        return answer

    def identity(self, n_workers=-1):
        return _rpc("identity", n_workers=n_workers)

    def get_task_stream(self, start=None, stop=None, count=None):
        return _rpc("get_task_stream", start=start, stop=stop, count=count)

    def get_logs(self, start=0, n=None, timestamp=False):
        return _rpc("get_logs", start=start, n=n, timestamp=timestamp)

    # -- sent to Go
    def log_event(self, topic, msg):
        host.post_go("rpc", rpc_op="log_event", args={"topic": topic, "msg": msg})

    async def retire_workers(self, workers=None, *, names=None, n=None, close_workers=False,
                             remove=True, stimulus_id=None, **kwargs):
        return await _arpc("retire_workers", workers=workers, names=names, n=n,
                           close_workers=close_workers, remove=remove)

    async def close(self, timeout=None, reason="unknown", **kwargs):
        host.post_go("close", reason=reason)

    async def register_worker_plugin(self, comm=None, plugin=None, name=None, idempotent=None):
        return await _arpc("register_worker_plugin", plugin=plugin, name=name, idempotent=idempotent)

    async def unregister_worker_plugin(self, comm=None, name=None):
        return await _arpc("unregister_worker_plugin", name=name)

    async def register_nanny_plugin(self, comm=None, plugin=None, name=None, idempotent=None):
        return await _arpc("register_nanny_plugin", plugin=plugin, name=name, idempotent=idempotent)

    async def unregister_nanny_plugin(self, comm=None, name=None):
        return await _arpc("unregister_nanny_plugin", name=name)

    # -- everything else
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        why = NOT_OFFERED.get(name, "not offered")
        raise AttributeError(
            f"dask-go-scheduler's dask_scheduler (a Python view of a Go scheduler) has no {name!r}: {why}"
        )

    def __repr__(self):
        return f"<Scheduler {self.address!r} (dask-go-scheduler host)>"


def _main_ioloop():
    from tornado.ioloop import IOLoop

    return IOLoop._ioloop_for_asyncio[host.loop]


def _rpc(op, **args):
    return host.call_go("rpc", rpc_op=op, args={k: v for k, v in args.items() if v is not None})


async def _arpc(op, **args):
    return await host.acall_go("rpc", rpc_op=op, args={k: v for k, v in args.items() if v is not None})


scheduler = HostScheduler()
host.scheduler = scheduler
