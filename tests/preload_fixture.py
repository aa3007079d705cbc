"""A scheduler preload for tests/test_preload.py: a click option of its
own, a plugin, a handler reached as client.scheduler.greet(...), and a
teardown that leaves a file behind."""

from __future__ import annotations

import click

from plugins_fixture import Recorder


@click.command()
@click.option("--greeting", default="hello", help="what greet answers with")
@click.option("--teardown-file", default="", help="written by dask_teardown")
def dask_setup(scheduler, greeting, teardown_file):
    scheduler.add_plugin(Recorder("pre-"), name="preloaded")

    async def greet(comm=None, name="nobody"):
        return f"{greeting}, {name}"

    scheduler.handlers["greet"] = greet
    scheduler.preload_teardown_file = teardown_file


def dask_teardown(scheduler):
    path = getattr(scheduler, "preload_teardown_file", "")
    if path:
        with open(path, "w") as f:
            f.write("torn down")
