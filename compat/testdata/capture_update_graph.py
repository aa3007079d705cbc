"""Record real update-graph messages and what a real Python scheduler made of
them, as offline fixtures for compat's materializer tests.

Run from compat/ (go generate does this):

    ../.venv/bin/python testdata/capture_update_graph.py

A stock Client talks to an in-process stock Scheduler with no workers. Its
_send_to_scheduler is wrapped: every update-graph op is framed exactly as the
client's comm would frame it (distributed.protocol.dumps) and written to
testdata/update_graph/<name>.bin. For the success cases the op is then
forwarded, and the scheduler's resulting TaskStates (dependencies, order =
priority[2], annotations minus the spans extension's "span", run_spec type and
data_producer) are written to <name>.expect.bin: the ground truth the Go tests
compare the helper's answer against. Error cases are not forwarded.

File layout: one dask-framed message (u64 N, u64 nframes, u64 lengths,
frames), the format of compat's helper pipe and of protocol.ReadFrames.
"""

from __future__ import annotations

import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "update_graph")

# A module only this script can import: graphs that reference it fail to
# unpickle in the helper, as when a client has a library the scheduler lacks.
sys.path.insert(0, os.path.join(HERE, "client_only"))

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from dask._expr import LLGExpr  # noqa: E402
from dask._task_spec import Task  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402
from distributed.protocol import dumps  # noqa: E402

import daskgo_client_only  # noqa: E402


def inc(x):
    return x + 1


def add(x, y):
    return x + y


class BoomGraph(dict):
    """A graph mapping that raises when the scheduler side materializes it:
    user code running inside __dask_graph__. It behaves on the client (which
    tokenizes it) and raises wherever daskgo_client_only is not imported."""

    def _check(self):
        if "daskgo_client_only" not in sys.modules:
            raise ValueError("boom while materializing the graph")

    def __iter__(self):
        self._check()
        return super().__iter__()

    def keys(self):
        self._check()
        return super().keys()

    def items(self):
        self._check()
        return super().items()


class SlowUnpickle:
    """Unpickles by sleeping: keeps the helper busy so a test can kill it
    mid-request. (time.sleep returns None, which becomes the argument.)"""

    def __reduce__(self):
        return (time.sleep, (120,))


def frame(frames):
    lengths = [memoryview(f).nbytes for f in frames]
    head = struct.pack(
        f"<QQ{len(frames)}Q", 8 * (1 + len(frames)) + sum(lengths), len(frames), *lengths
    )
    return head + b"".join(bytes(f) for f in frames)


class Recorder:
    def __init__(self, client):
        self.client = client
        self.name = None
        self.forward = True
        self.orig = client._send_to_scheduler
        client._send_to_scheduler = self.send

    def send(self, msg):
        if msg.get("op") == "update-graph" and self.name is not None:
            path = os.path.join(OUT, self.name + ".bin")
            with open(path, "wb") as f:
                f.write(frame(dumps(msg)))
            print("wrote", path, file=sys.stderr)
            self.keys = set(msg["keys"])
            self.name = None
            if not self.forward:
                return
        self.orig(msg)

    def capture(self, name, fn, forward=True):
        before = set(self.client.run_on_scheduler(task_keys))
        self.name, self.forward = name, forward
        result = fn()
        if not forward:
            return result
        deadline = time.time() + 30
        while True:
            now = set(self.client.run_on_scheduler(task_keys))
            if self.keys <= now:
                break
            if time.time() > deadline:
                raise TimeoutError(f"{name}: scheduler never created {self.keys - now}")
            time.sleep(0.05)
        expect = self.client.run_on_scheduler(describe_tasks, exclude=list(before))
        with open(os.path.join(OUT, name + ".expect.bin"), "wb") as f:
            f.write(frame(dumps(expect)))
        return result


def task_keys(dask_scheduler=None):
    return list(dask_scheduler.tasks)


def describe_tasks(dask_scheduler=None, exclude=()):
    exclude = set(exclude)
    out = []
    for key, ts in dask_scheduler.tasks.items():
        if key in exclude or ts.run_spec is None:
            continue
        annotations = dict(ts.annotations or {})
        annotations.pop("span", None)
        out.append(
            {
                "key": key,
                "deps": [dts.key for dts in ts.dependencies],
                "order": ts.priority[2],
                "kind": type(ts.run_spec).__name__,
                "data_producer": bool(ts.run_spec.data_producer),
                "annotations": annotations,
            }
        )
    return out


def main():
    # dask.order breaks ties in set iteration order, which depends on the
    # str hash seed: TestPythonOrderingMatchesRecording runs the helper with
    # PYTHONHASHSEED=0 too.
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    os.makedirs(OUT, exist_ok=True)
    with LocalCluster(
        n_workers=0, processes=False, dashboard_address=None
    ) as cluster, Client(cluster) as c:
        r = Recorder(c)
        futures = []
        futures.append(r.capture("submit_inc", lambda: c.submit(inc, 1, key="inc-1")))
        futures.append(
            r.capture(
                "submit_annotated",
                lambda: c.submit(
                    inc, 2, key="inc-2", workers=["tcp://127.0.0.1:1"], priority=5,
                    retries=3, allow_other_workers=True, resources={"GPU": 1},
                ),
            )
        )
        futures.extend(r.capture("map10", lambda: c.map(inc, range(10))))
        x = da.ones((100, 100), chunks=10).sum()
        futures.append(r.capture("array_sum", lambda: c.compute(x)))

        # from_array chunks are data producers, and the numpy data travels as
        # pickle-5 out-of-band buffers in expr_ser and in each run_spec.
        arr = np.arange(2500, dtype="f8").reshape(50, 50)
        z = da.from_array(arr, chunks=25)
        futures.append(r.capture("from_array", lambda: c.compute(z.sum())))

        def annotated():
            with dask.annotate(retries=2, tag=lambda k: f"tag-{len(str(k))}"):
                y = da.ones((20, 20), chunks=10) + 1
                return c.compute(y.sum())

        futures.append(r.capture("annotate_retries", annotated))
        base = futures[0]
        futures.append(
            r.capture("depends_on_future", lambda: c.submit(add, base, 10, key="add-10"))
        )

        r.capture(
            "unimportable_module",
            lambda: c.submit(daskgo_client_only.double, 1, key="double-1"),
            forward=False,
        )
        boom = LLGExpr(BoomGraph({"boom-1": Task("boom-1", inc, 1)}))
        r.capture(
            "boom_materialize",
            lambda: c._graph_to_futures(
                boom, keys=["boom-1"], span_metadata={"collections": []}
            ),
            forward=False,
        )
        r.capture(
            "slow_unpickle",
            lambda: c.submit(inc, SlowUnpickle(), key="slow-1", pure=False),
            forward=False,
        )
        del futures


if __name__ == "__main__":
    main()
