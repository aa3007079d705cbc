"""dask-go-scheduler: a Go scheduler for dask.distributed, as a package.

- ``dask-go-scheduler`` and ``dask-scheduler``: commands that run the Go
  binary this package built at install time, with ``--python`` defaulting
  to this environment's interpreter (cli.py).
- :class:`GoScheduler`: the binary as a ``distributed.deploy.spec.ProcessInterface``,
  a scheduler for ``SpecCluster`` and dask-jobqueue's ``scheduler_cls``
  (process.py).
- :class:`LocalGoCluster`: distributed's ``LocalCluster`` with this
  scheduler (local.py).

Recipes for Kubernetes, Helm, batch systems and dask-gateway: README.md.
"""

from dask_go_scheduler._binary import binary_path
from dask_go_scheduler.local import LocalGoCluster
from dask_go_scheduler.process import GoScheduler

__all__ = ["GoScheduler", "LocalGoCluster", "binary_path"]
__version__ = "0.1.0.dev0"
