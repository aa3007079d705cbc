"""The materializer helper's P2P shuffle requests (their Go side is
materializer_shuffle.go; distributed's is ShuffleSchedulerPlugin in
distributed/shuffle/_scheduler_plugin.py): the worker plugin pickle every
register-worker reply carries, and shuffle_run, the Python half of a run's
creation. The engine keeps everything else about a run.

Installed before materializer.py, which imports shuffle_run and
worker_plugins from here.
"""

from distributed.protocol.pickle import dumps as pickle_dumps
from distributed.protocol.serialize import ToPickle
from distributed.shuffle._core import P2PBarrierTask, ShuffleRunSpec
from distributed.shuffle._worker_plugin import ShuffleWorkerPlugin

import helper_wire as wire


def worker_plugins():
    """The worker plugins every register-worker reply carries: the P2P
    shuffle plugin, pickled as ShuffleSchedulerPlugin.start registers it."""
    return {"shuffle": pickle_dumps(ShuffleWorkerPlugin())}


def shuffle_run(req):
    """The Python half of ShuffleSchedulerPlugin._create: pick a worker for
    every output partition (keeping the partitions an aligned shuffle already
    placed) and build the ShuffleRunSpec with the run id Go chose."""
    barrier = req.barrier
    if not isinstance(barrier, P2PBarrierTask):
        raise TypeError(
            f"shuffle_run: the barrier's run_spec is a {type(barrier).__name__}, not a P2PBarrierTask"
        )
    spec = barrier.spec
    if spec.id != req.shuffle_id:
        raise ValueError(f"shuffle_run: barrier of shuffle {spec.id!r}, asked for {req.shuffle_id!r}")
    if not req.workers:
        raise ValueError(f"shuffle_run: no workers for shuffle {spec.id!r}")
    # msgpack arrays arrive as tuples, so array partitions compare equal
    existing = dict(req.existing)
    worker_for = {}
    for partition in spec.output_partitions:
        worker = existing.get(partition)
        if worker is None:
            worker = spec.pick_worker(partition, req.workers)
        worker_for[partition] = worker
    run_spec = ShuffleRunSpec(spec=spec, worker_for=worker_for, span_id=req.span_id)
    # run_id is a per-process counter in distributed; the scheduler owns it
    object.__setattr__(run_spec, "run_id", req.run_id)
    return wire.shuffle_run_answer(
        req.id,
        ToPickle(run_spec),
        [[wire.msgpack_safe(p), w] for p, w in worker_for.items()],
        sorted(set(worker_for.values())),
    )
