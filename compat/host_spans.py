"""``dask_scheduler.extensions["spans"]`` in the scheduler-side host: span
metrics.

The Go engine keeps the spans that tasks were annotated with (distributed.span)
and sums the fine performance metrics workers send per span in their heartbeats
(scheduler/spans.go). Each read of ``extensions["spans"]`` builds distributed's
own SpansSchedulerExtension from that (one "spans" call to Go), so its Span
objects answer as distributed's do: name, id, parent, children,
cumulative_worker_metrics, find_by_tags, merge_by_tags, merge_all.

What Go does not keep: the task groups of a span. Each Span here has one
stand-in group whose start is when the span was first seen and whose stop is
its last heartbeat metrics (what Span.stop, active_cpu_seconds and the
"idle or other spans" entry of cumulative_worker_metrics read); states,
all_durations, duration and nbytes_total are empty. Tasks outside any span
(distributed's ("default",) span) carry no span id, so there is no default
span.
"""

from __future__ import annotations

import host
from host_scheduler import scheduler


class _StandInGroup:
    """What Span reads of a TaskGroup, for a span whose groups Go does not keep."""

    def __init__(self, start, stop):
        self.start, self.stop = start, stop
        self.done = True
        self.states = {}
        self.all_durations = {}
        self.duration = 0.0
        self.nbytes_total = 0
        self.name = "(dask-go-scheduler: groups not kept)"


def _as_tuple(v):
    return tuple(_as_tuple(x) for x in v) if isinstance(v, (list, tuple)) else v


class _History:
    """Scheduler.total_nthreads_history, as far as Span reads it."""

    def __init__(self, started, nthreads):
        self.total_nthreads_history = [(started, nthreads)]


def build():
    from distributed.spans import SpansSchedulerExtension

    snap = host.call_go("spans")
    ext = SpansSchedulerExtension(_History(snap.get("started") or 0.0, snap.get("total_nthreads") or 0))
    for d in snap.get("spans") or ():
        span = ext._ensure_span(tuple(d["name"]), tuple(d["ids"]))
        span.enqueued = d["enqueued"]
        span.groups = {_StandInGroup(d["enqueued"], max(d["last"], d["enqueued"]))}
        for key, value in d["metrics"]:
            span._cumulative_worker_metrics[_as_tuple(key)] += value
    return ext


class _Extensions(dict):
    """dask_scheduler.extensions: kept in the host, but "spans" is read from Go
    each time."""

    def __getitem__(self, name):
        if name == "spans" and not dict.__contains__(self, name):
            return build()
        return dict.__getitem__(self, name)

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __contains__(self, name):
        return name == "spans" or dict.__contains__(self, name)


scheduler.__dict__["extensions"] = _Extensions(scheduler.__dict__.get("extensions") or {})
