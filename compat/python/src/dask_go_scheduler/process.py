"""GoScheduler: the Go binary as a SpecCluster scheduler.

``distributed.deploy.spec.SpecCluster`` makes its scheduler with
``cls(**options)``, awaits it, then talks to ``.external_address or
.address`` (``SpecCluster._start``); workers get ``.contact_address or
.address`` (``_correct_state_internal``); closing the cluster sends the
scheduler ``terminate`` and then awaits ``close()`` (``SpecCluster._close``).
dask-jobqueue's ``JobQueueCluster`` builds the same spec from
``scheduler_cls`` and ``scheduler_options``. So::

    SpecCluster(scheduler={"cls": GoScheduler, "options": {"dashboard_address": ":8787"}}, ...)
    dask_jobqueue.SLURMCluster(scheduler_cls=GoScheduler, ...)

The process: the binary (``_binary.binary_path``) with ``dask scheduler``'s
flags, ``--python sys.executable`` (its graph helper runs in this
environment), in a session of its own (a Ctrl-C in a terminal reaches this
Python process, whose cluster then closes the scheduler in order). Its log
lines (JSON on stderr) go to the ``dask_go_scheduler.scheduler`` logger; the
address comes from its "Scheduler at" line. It is stopped by its PID:
SIGTERM (a graceful shutdown), then SIGKILL after ``stop_timeout``; also at
interpreter exit if it is still running then (after distributed's clusters
closed), and when a GoScheduler is garbage-collected unclosed. If this Python process is
SIGKILLed, the scheduler outlives it (pass ``idle_timeout`` to bound that).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from distributed.core import Status
from distributed.deploy.spec import ProcessInterface, close_clusters

from dask_go_scheduler._binary import binary_path

logger = logging.getLogger("dask_go_scheduler.scheduler")

_LEVELS = {
    "trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
    "error": logging.ERROR, "fatal": logging.CRITICAL, "panic": logging.CRITICAL,
}

# distributed.Scheduler keyword arguments that are Python inside the
# scheduler process, or settings this class has no flag for; each is
# refused at construction, naming it (see GoScheduler's docstring).
_WHY_NOT = {
    "services": "extra services are Python objects run inside the Python scheduler",
    "service_kwargs": "extra services are Python objects run inside the Python scheduler",
    "blocked_handlers": "not supported by dask-go-scheduler",
    "plugins": "scheduler plugins objects cannot cross to the Go process: register them with Client.register_plugin, or add them in a preload",
}


class GoScheduler(ProcessInterface):
    """The Go scheduler in a process of its own, for ``SpecCluster``.

    The options are ``distributed.Scheduler``'s where they have a
    ``dask scheduler`` flag: ``host``, ``port`` (0: a free one, the
    default), ``interface``, ``protocol`` (tcp only), ``dashboard_address``
    (default ``":0"``: a free port; None: no dashboard pages),
    ``dashboard``, ``http_prefix``/``dashboard_prefix``, ``idle_timeout``,
    ``scheduler_file``, ``security`` (a Security object), ``preload`` and
    ``preload_argv`` (run in the scheduler's Python host), ``jupyter``
    (passed on: the binary refuses it at start, naming it).
    Ours: ``python`` (the interpreter of the graph helper, default
    ``sys.executable``), ``config`` (a dask YAML file), ``log_level``,
    ``env`` (added to the environment, e.g. ``DASK_DISTRIBUTED__...``
    variables), ``extra_args`` (more flags), ``binary``, ``start_timeout``,
    ``stop_timeout``, ``propagate_sys_path`` (default True: this process's
    own ``sys.path`` entries go on ``PYTHONPATH``, so the helper imports the
    user's modules as an in-process scheduler would). Any other keyword
    fails at once, naming it.
    """

    def __init__(
        self,
        host: str | None = None,
        port: int | str | None = 0,
        interface: str | None = None,
        protocol: str | None = None,
        dashboard_address: str | None = ":0",
        dashboard: bool | None = None,
        http_prefix: str | None = None,
        dashboard_prefix: str | None = None,
        idle_timeout: str | float | None = None,
        scheduler_file: str | os.PathLike | None = None,
        security: Any = None,
        preload: str | list[str] | None = None,
        preload_argv: list[str] | tuple[str, ...] = (),
        jupyter: bool = False,
        python: str | None = None,
        config: str | os.PathLike | None = None,
        log_level: str = "info",
        env: dict[str, str] | None = None,
        extra_args: list[str] | tuple[str, ...] = (),
        binary: str | os.PathLike | None = None,
        start_timeout: float = 60,
        stop_timeout: float = 10,
        propagate_sys_path: bool = True,
        name: Any = None,
        **unsupported: Any,
    ):
        bad = {k: v for k, v in unsupported.items() if v not in (None, {}, [], ())}
        if bad:
            why = "; ".join(f"{k}: {_WHY_NOT.get(k, 'no such option here')}" for k in sorted(bad))
            raise ValueError(f"GoScheduler does not support the scheduler option(s) {sorted(bad)} ({why}). "
                             "dask settings go in config= (a dask YAML file) or env= (DASK_* variables)")
        if security is True:
            raise ValueError("GoScheduler: security=True: pass a Security object (Security.temporary() makes one); "
                             "the cluster's workers and clients need the same certificates")
        super().__init__(name=name)
        self.binary = Path(binary) if binary else None
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        # TLS as distributed.comm.tls.* variables: they carry file paths or
        # the PEM text itself (Security.temporary()), which flags cannot
        self.env = {**_tls_env(security), **(env or {})}
        self.propagate_sys_path = propagate_sys_path
        self.args = self._flags(
            host=host, port=port, interface=interface, protocol=protocol,
            dashboard_address=dashboard_address, dashboard=dashboard,
            prefix=dashboard_prefix if dashboard_prefix is not None else http_prefix,
            idle_timeout=idle_timeout, scheduler_file=scheduler_file, preload=preload, jupyter=jupyter,
            python=python or sys.executable, config=config, log_level=log_level,
        ) + [str(a) for a in extra_args] + [str(a) for a in preload_argv or ()]  # last: dask scheduler's PRELOAD_ARGV
        self.proc: subprocess.Popen | None = None
        self.dashboard_port: int | None = None
        self.lines: collections.deque[str] = collections.deque(maxlen=500)
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None
        self._finalizer: weakref.finalize | None = None

    @staticmethod
    def _flags(*, host, port, interface, protocol, dashboard_address, dashboard, prefix, idle_timeout,
               scheduler_file, preload, jupyter, python, config, log_level) -> list[str]:
        args: list[str] = []
        if host:
            args += ["--host", str(host)]
        if port is not None:
            args += ["--port", str(port)]
        if interface:
            args += ["--interface", str(interface)]
        if protocol:
            args += ["--protocol", str(protocol)]
        if dashboard_address is None or dashboard is False:
            # distributed: dashboard_address=None means no dashboard; the
            # HTTP routes (/health, /metrics) still answer on a free port
            args += ["--no-dashboard", "--dashboard-address", str(dashboard_address or ":0")]
        else:
            args += ["--dashboard-address", str(dashboard_address)]
        if prefix:
            args += ["--dashboard-prefix", str(prefix)]
        if idle_timeout is not None:
            args += ["--idle-timeout", str(idle_timeout)]
        if scheduler_file:
            args += ["--scheduler-file", str(scheduler_file)]
        for p in [preload] if isinstance(preload, str) else (preload or []):
            args += ["--preload", str(p)]
        if jupyter:
            args += ["--jupyter"]
        if config:
            args += ["--config", str(config)]
        return args + ["--python", str(python), "--log-level", str(log_level)]

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.propagate_sys_path:
            env["PYTHONPATH"] = os.pathsep.join(_user_sys_path() + [p for p in [env.get("PYTHONPATH")] if p])
        env.update(self.env)
        return env

    async def start(self) -> None:
        binary = str(self.binary or binary_path())
        cmd = [binary, *self.args]
        logger.debug("starting %s", " ".join(cmd))
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=self._environment(), start_new_session=True,
        )
        _LIVE[self.proc.pid] = self.proc
        # a GoScheduler dropped without close(): stop its process when collected
        self._finalizer = weakref.finalize(self, _stop_pid, self.proc, self.stop_timeout)
        self._finalizer.atexit = False  # at exit: _stop_at_exit, after the clusters closed
        loop = asyncio.get_running_loop()
        self._reader = threading.Thread(target=self._read_logs, args=(self.proc, loop),
                                        name=f"dask-go-scheduler logs {self.proc.pid}", daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.start_timeout
        while not self._ready.is_set():
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise RuntimeError(f"dask-go-scheduler exited with code {self.proc.returncode} before listening "
                                   f"({' '.join(cmd)}):\n" + "\n".join(list(self.lines)[-20:]))
            if time.monotonic() > deadline:
                await self.close()
                raise TimeoutError(f"dask-go-scheduler did not report its address within {self.start_timeout} s:\n"
                                   + "\n".join(list(self.lines)[-20:]))
            await asyncio.sleep(0.02)
        self.external_address = self.address
        await super().start()

    def _read_logs(self, proc: subprocess.Popen, loop: asyncio.AbstractEventLoop) -> None:
        """Forward the process's log lines until it exits; take the address
        and dashboard port from them."""
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if not line:
                continue
            self.lines.append(line)
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise ValueError
            except ValueError:
                logger.warning("%s", line)  # not a log record: a panic, a usage error, a helper's output
                continue
            msg = rec.get("message", "")
            if msg == "Scheduler at" and "address" in rec:
                self.address = rec["address"]
                self._ready.set()
            elif msg == "dashboard at" and "port" in rec:
                self.dashboard_port = rec["port"]
            extra = " ".join(f"{k}={v}" for k, v in rec.items() if k not in ("level", "time", "message"))
            logger.log(_LEVELS.get(rec.get("level", "info"), logging.INFO), "%s%s", msg, f" {extra}" if extra else "")
        proc.stdout.close()
        rc = proc.wait()
        if self.status != Status.closing and self.status != Status.closed:
            logger.info("dask-go-scheduler (pid %d) exited with code %d", proc.pid, rc)
        try:
            loop.call_soon_threadsafe(self._event_finished.set)
        except RuntimeError:  # the loop is closed
            pass

    async def close(self) -> None:
        if self.status in (Status.closing, Status.closed):
            await self.finished()
            return
        self.status = Status.closing
        proc = self.proc
        if proc is not None and proc.poll() is None:
            # after SpecCluster's terminate the process is already leaving
            for _ in range(10):
                if proc.poll() is not None:
                    break
                await asyncio.sleep(0.05)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                deadline = time.monotonic() + self.stop_timeout
                while proc.poll() is None and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            if proc.poll() is None:
                logger.warning("dask-go-scheduler (pid %d) did not stop within %s s of SIGTERM; killing it",
                               proc.pid, self.stop_timeout)
                proc.kill()
                proc.wait(5)
        if self._reader is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._reader.join, 5)
        if self._finalizer is not None:
            self._finalizer.detach()
        if proc is not None:
            _LIVE.pop(proc.pid, None)
        await super().close()

    def logs(self) -> str:
        """The process's last log lines (up to 500), as written."""
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        return f"<GoScheduler: status={self.status.name} address={self.address!r} pid={self.pid}>"


def _tls_env(security: Any) -> dict[str, str]:
    """The scheduler role's part of a distributed Security, as the DASK_*
    variables the binary reads."""
    if not security:
        return {}
    env = {}
    for attr, key in (("tls_ca_file", "CA_FILE"), ("tls_scheduler_cert", "SCHEDULER__CERT"),
                      ("tls_scheduler_key", "SCHEDULER__KEY"), ("tls_ciphers", "CIPHERS")):
        if getattr(security, attr, None):
            env[f"DASK_DISTRIBUTED__COMM__TLS__{key}"] = str(getattr(security, attr))
    for attr, key in (("tls_min_version", "MIN_VERSION"), ("tls_max_version", "MAX_VERSION")):
        v = getattr(security, attr, None)
        if v is not None:  # ssl.TLSVersion.TLSv1_2 -> 1.2
            env[f"DASK_DISTRIBUTED__COMM__TLS__{key}"] = {771: "1.2", 772: "1.3"}.get(int(v), str(v))
    env["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] = str(bool(getattr(security, "require_encryption", False)))
    return env


def _uses_tls(security: Any) -> bool:
    if not security:
        return False
    if security is True:
        return True
    if getattr(security, "require_encryption", False):
        return True
    return any(getattr(security, a, None) for a in ("tls_ca_file", "tls_scheduler_cert", "tls_scheduler_key"))


def _user_sys_path() -> list[str]:
    """sys.path entries of this process that the interpreter would not have
    by itself (the script's folder, the cwd, PYTHONPATH, pytest's rootdir):
    an in-process scheduler imports the user's modules from there."""
    prefixes = {os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}}
    out = []
    for p in sys.path:
        p = os.path.realpath(p or os.getcwd())
        if not os.path.isdir(p) or any(p == q or p.startswith(q + os.sep) for q in prefixes):
            continue
        if p not in out:
            out.append(p)
    return out


# processes started and not yet stopped by close(), by PID
_LIVE: dict[int, subprocess.Popen] = {}


@atexit.register
def _stop_at_exit() -> None:
    """At interpreter exit: first what distributed's own exit hook does a
    moment later (close every SpecCluster still open, which terminates its
    scheduler in order; idempotent), then stop any scheduler process of
    ours still running, by its PID."""
    with contextlib.suppress(Exception):
        close_clusters()
    for proc in list(_LIVE.values()):
        _stop_pid(proc, 10)
    _LIVE.clear()


def _stop_pid(proc: subprocess.Popen, grace: float) -> None:
    """Stop this process: SIGTERM, then SIGKILL after grace seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
