"""``python -m dask_go_scheduler``: the ``dask-go-scheduler`` command."""

from dask_go_scheduler.cli import main

main()
