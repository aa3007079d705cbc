"""performance_report and dask_scheduler.monitor in the scheduler-side host.

``dask_scheduler.monitor`` is the Go scheduler's system monitor
(scheduler/server/sysmon.go) behind distributed's SystemMonitor interface:
count, quantities, range_query, recent, update. performance_report's
__aenter__ reads its count through run_on_scheduler.

The op performance_report renders the report with distributed's own
Scheduler.performance_report, given a view of dask_scheduler that adds what
it reads besides the snapshot: get_profile (the workers' profiles, merged
by Go; the scheduler's own is empty: there is no Python event loop to
sample) and get_logs with distributed's signature. Rendering (bokeh, about a
second) runs in a thread with its own event loop, so the host's loop goes on
serving other requests meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque

import host
from host_scheduler import HostScheduler, scheduler

_NO_RANGE = 1 << 62  # a start past every count: the answer carries only the count


class GoSystemMonitor:
    """distributed.system_monitor.SystemMonitor's reading side, over Go's."""

    def _query(self, **kw):
        return host.call_go("monitor", **kw)

    @property
    def count(self):
        return self._query(start=_NO_RANGE)["count"]

    @property
    def quantities(self):
        return {k: deque(v) for k, v in self._query()["quantities"].items()}

    def range_query(self, start):
        return {k: list(v) for k, v in self._query(start=int(start))["quantities"].items()}

    def recent(self):
        return {k: v[-1] for k, v in self._query()["quantities"].items() if v}

    def update(self):
        q = self._query(sample=True, start=_NO_RANGE)
        return q

    def __repr__(self):
        return "<SystemMonitor of dask-go-scheduler>"


_monitor = GoSystemMonitor()
HostScheduler.monitor = property(lambda self: _monitor)


class ReportView:
    """dask_scheduler as Scheduler.performance_report reads it."""

    def __getattr__(self, name):
        return getattr(scheduler, name)

    async def get_profile(self, comm=None, workers=None, scheduler=False, server=False,
                          merge_workers=True, start=None, stop=None, key=None):
        args = {"workers": workers, "scheduler": scheduler, "server": server,
                "merge_workers": merge_workers, "start": start, "stop": stop, "key": key}
        return await host.acall_go("profile", timeout=300, **{k: v for k, v in args.items() if v is not None})

    def get_logs(self, start=0, n=None, timestamps=False):
        args = {"start": start, "n": n, "timestamps": timestamps}
        return host.call_go("rpc", rpc_op="get_logs", args={k: v for k, v in args.items() if v is not None})


def _render(start, last_count, code, mode):
    from distributed.scheduler import Scheduler

    return asyncio.run(Scheduler.performance_report(ReportView(), start=start, last_count=last_count,
                                                    code=code, mode=mode))


@host.request("performance_report")
async def performance_report(msg):
    fut = host.loop.create_future()

    def run():
        try:
            r = _render(msg.get("start"), msg.get("last_count"), msg.get("code") or "", msg.get("mode"))
        except BaseException as e:  # noqa: B036 - answered to the caller
            host.loop.call_soon_threadsafe(lambda: fut.done() or fut.set_exception(e))
        else:
            host.loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(r))

    threading.Thread(target=run, name="performance_report", daemon=True).start()
    return {"result": await fut}
