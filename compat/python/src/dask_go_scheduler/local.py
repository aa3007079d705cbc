"""LocalGoCluster: distributed's LocalCluster with the Go scheduler.

The same arguments and defaults as ``distributed.LocalCluster``
(deploy/local.py), built the same way: a ``SpecCluster`` whose workers are
stock ``Nanny`` (processes=True) or ``Worker`` (processes=False) objects in
this process, and whose scheduler is a ``GoScheduler`` process instead of
an in-process ``distributed.Scheduler``. What follows from that:

- ``processes=False``: the workers are threads of this process, as there,
  but they reach the scheduler over TCP on 127.0.0.1, not ``inproc://``
  (the scheduler is another process); ``protocol="inproc"`` is refused.
- Options that are Python inside the scheduler process (``services``,
  ``service_kwargs``, ``blocked_handlers``) are refused at once, naming
  them. ``security=True`` makes certificates for the cluster, as
  LocalCluster does.
  ``scheduler_kwargs`` go to GoScheduler (``idle_timeout``, ``config``,
  ``env``, ``log_level``, ...).
- ``cluster.scheduler`` is the GoScheduler (address, pid, ``logs()``), not
  a ``distributed.Scheduler``; use ``Client.scheduler_info()`` or
  ``cluster.scheduler_info`` for the scheduler's state.
- ``scale(n)`` down retires the workers it removes gracefully first
  (``retire_workers(names=...)``: their data is copied to the workers that
  stay), then closes them. Stock SpecCluster passes the names as addresses
  (``retire_workers(workers=names)``), which every scheduler ignores, so
  there the closed workers' keys are lost and recomputed.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import toolz
from dask.system import CPU_COUNT
from dask.widgets import get_template
from distributed.core import Status
from distributed.deploy.spec import SpecCluster
from distributed.deploy.utils import nprocesses_nthreads
from distributed.nanny import Nanny
from distributed.worker import Worker
from distributed.worker_memory import parse_memory_limit

from dask_go_scheduler.process import GoScheduler, _uses_tls

logger = logging.getLogger(__name__)


class LocalGoCluster(SpecCluster):
    """A local cluster: the Go scheduler and stock dask workers.

    >>> from dask_go_scheduler import LocalGoCluster
    >>> from distributed import Client
    >>> with LocalGoCluster(n_workers=2) as cluster, Client(cluster) as client:  # doctest: +SKIP
    ...     client.submit(sum, [1, 2]).result()
    3

    Arguments as ``distributed.LocalCluster``'s; see the module docstring
    for what differs.
    """

    def __init__(
        self,
        name=None,
        n_workers=None,
        threads_per_worker=None,
        processes=None,
        loop=None,
        host=None,
        scheduler_port=0,
        silence_logs=logging.WARN,
        dashboard_address=":8787",
        worker_dashboard_address=None,
        services=None,
        worker_services=None,
        service_kwargs=None,
        asynchronous=False,
        security=None,
        protocol=None,
        blocked_handlers=None,
        interface=None,
        worker_class=None,
        scheduler_kwargs=None,
        scheduler_sync_interval=1,
        **worker_kwargs: Any,
    ):
        refused = [k for k, v in (("services", services), ("service_kwargs", service_kwargs),
                                  ("blocked_handlers", blocked_handlers)) if v]
        if refused:
            raise ValueError(f"LocalGoCluster: {', '.join(refused)} configure the Python scheduler's own services "
                             "and handlers, which run inside its process; the Go scheduler has none of them")
        if security is True:  # as LocalCluster: certificates made for this cluster
            from distributed.security import Security

            security = Security.temporary()
        if protocol is None and host and "://" in host:
            protocol = host.split("://")[0]
        if protocol is None and _uses_tls(security):
            protocol = "tls://"
        protocol = (protocol or "tcp://").rstrip("/").rstrip(":") + "://"
        if protocol not in ("tcp://", "tls://"):
            raise ValueError(f"LocalGoCluster: protocol {protocol!r} is not supported (tcp:// and tls:// only"
                             + ("; inproc:// needs the scheduler in this process, and it is a separate Go process"
                                if protocol.startswith("inproc") else "") + ")")
        if "dashboard" in worker_kwargs:
            logger.warning("Setting `dashboard` is discouraged. Please set `dashboard_address` to affect the "
                           "scheduler (more common) and `worker_dashboard_address` for the worker (less common).")

        if processes is None:
            processes = worker_class is None or issubclass(worker_class, Nanny)
        if worker_class is None:
            worker_class = Nanny if processes else Worker
        self.status = None
        self.processes = processes

        if host is None and not interface:
            host = "127.0.0.1"
        if n_workers is None and threads_per_worker is None:
            if processes:
                n_workers, threads_per_worker = nprocesses_nthreads()
            else:
                n_workers, threads_per_worker = 1, CPU_COUNT
        if n_workers is None and threads_per_worker is not None:
            n_workers = max(1, CPU_COUNT // threads_per_worker) if processes else 1
        if n_workers and threads_per_worker is None:
            threads_per_worker = max(1, math.ceil(CPU_COUNT / n_workers))
        if n_workers and "memory_limit" not in worker_kwargs:
            worker_kwargs["memory_limit"] = parse_memory_limit("auto", 1, n_workers, logger=logger)

        worker_kwargs.update({
            "host": host,
            "nthreads": threads_per_worker,
            "services": worker_services or {},
            "dashboard_address": worker_dashboard_address,
            "dashboard": worker_dashboard_address is not None,
            "interface": interface,
            "protocol": protocol,
            "security": security,
            "silence_logs": silence_logs,
        })
        scheduler = {
            "cls": GoScheduler,
            "options": toolz.merge(
                dict(host=None if interface else host, port=scheduler_port, interface=interface,
                     protocol=protocol, dashboard_address=dashboard_address, security=security),
                scheduler_kwargs or {},
            ),
        }
        worker = {"cls": worker_class, "options": worker_kwargs}
        workers = {i: worker for i in range(n_workers or 0)}
        super().__init__(
            name=name,
            scheduler=scheduler,
            workers=workers,
            worker=worker,
            loop=loop,
            asynchronous=asynchronous,
            silence_logs=silence_logs,
            security=security,
            scheduler_sync_interval=scheduler_sync_interval,
        )

    async def _correct_state_internal(self) -> None:
        # Retire the workers scale() dropped before SpecCluster closes them,
        # by name (SpecCluster's keys are the workers' names): the scheduler
        # copies the data only they hold to the workers that stay. Names it
        # does not know (workers still starting) are ignored there. With
        # remove=False, close_workers=False they wait in closing_gracefully
        # for SpecCluster to close them through their Nanny a moment later:
        # a close sent by the scheduler as well would race that one (the
        # worker asks its nanny to close_gracefully while the nanny is
        # already closing, and hangs until the nanny kills it 4 s later).
        if self.scheduler is not None and self.scheduler.status == Status.running and self.scheduler_comm:
            async with self._lock:
                to_close = [n for n in self.workers if n not in self.worker_spec]
                if to_close and self.status == Status.running:
                    await self.scheduler_comm.retire_workers(names=to_close, remove=False, close_workers=False)
        await super()._correct_state_internal()

    def _repr_html_(self, cluster_status=None):
        cluster_status = get_template("local_cluster.html.j2").render(
            status=self.status.name, processes=self.processes, cluster_status=cluster_status)
        return super()._repr_html_(cluster_status=cluster_status)
