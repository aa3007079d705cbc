"""Scheduler plugins for tests/test_scheduler_plugins.py: importable on the
scheduler side (tests/ is on the PYTHONPATH of every process the tests
start), as a user's own module is in the same software environment."""

from __future__ import annotations

import os
import time
from collections import defaultdict

from distributed.diagnostics.plugin import SchedulerPlugin


class Recorder(SchedulerPlugin):
    """Counts every hook and keeps each key's transitions in order."""

    name = "recorder"

    def __init__(self, prefix=""):
        self.prefix = prefix
        self.transitions = defaultdict(list)
        self.n_transitions = 0
        self.kwargs = {}
        self.calls = defaultdict(int)
        self.whom = defaultdict(list)  # hook -> the workers or clients it named, in order
        self.started = False

    async def start(self, scheduler):
        self.started = True

    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs):
        self.n_transitions += 1
        if str(key).startswith(self.prefix):
            self.transitions[str(key)].append(f"{start}->{finish}")
            if kwargs:
                self.kwargs[f"{key}:{start}->{finish}"] = sorted(kwargs)
        assert isinstance(stimulus_id, str) and stimulus_id

    def update_graph(self, scheduler, *, client, keys, tasks, annotations, priority, stimulus_id, **kw):
        self.calls["update_graph"] += 1
        self.calls["update_graph_tasks"] += len(tasks)

    def add_worker(self, scheduler, worker):
        self.calls["add_worker"] += 1
        self.whom["add_worker"].append(worker)

    def remove_worker(self, scheduler, worker, *, stimulus_id, **kw):
        self.calls["remove_worker"] += 1
        self.whom["remove_worker"].append(worker)

    def add_client(self, scheduler, client):
        self.calls["add_client"] += 1
        self.whom["add_client"].append(client)

    def remove_client(self, scheduler, client):
        self.calls["remove_client"] += 1
        self.whom["remove_client"].append(client)

    def log_event(self, topic, msg):
        if topic == "plugin-test":
            self.calls["log_event"] += 1


class Raising(SchedulerPlugin):
    """Every hook raises."""

    name = "raising"

    def __init__(self):
        self.n = 0

    def transition(self, key, start, finish, *args, **kwargs):
        self.n += 1
        raise ValueError(f"raising plugin: {key} {start}->{finish}")

    def update_graph(self, scheduler, **kwargs):
        raise ValueError("raising plugin: update_graph")


class Gated(SchedulerPlugin):
    """transition() blocks until the file at `gate` exists, then counts. On
    Python's scheduler this would stop the scheduler itself."""

    name = "gated"

    def __init__(self, gate):
        self.gate = gate
        self.n = 0

    def transition(self, key, start, finish, *args, **kwargs):
        while not os.path.exists(self.gate):
            time.sleep(0.01)
        self.n += 1


class Counting(SchedulerPlugin):
    """The cost benchmark's plugin: counts transitions, nothing else."""

    name = "counting"

    def __init__(self):
        self.n = 0

    def transition(self, key, start, finish, *args, **kwargs):
        self.n += 1
