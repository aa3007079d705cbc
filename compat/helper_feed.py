"""The materializer helper's feed_setup request (its Go side is
helper_feed.go): a feed op's pickled closures, unpickled once, told apart as
a progress bar's (whose keys, complete and group_by Go then tracks itself)
or anything else, which only a scheduler-side Python process can run.

Installed before materializer.py, which imports feed_setup from here.
"""

import functools
import types

from dask.utils import key_split
from distributed.protocol.pickle import loads as pickle_loads


def _nested_code(func, name):
    """The code object of the function `name` defined inside func."""
    for c in func.__code__.co_consts:
        if isinstance(c, types.CodeType) and c.co_name == name:
            return c
    raise LookupError(f"{func.__qualname__} defines no {name}")


@functools.cache
def _stock_feeds():
    """(kind, setup's code, function's code) of the feeds that
    ProgressBar.listen and MultiProgressBar.listen open."""
    from distributed.diagnostics.progressbar import MultiProgressBar, ProgressBar

    return [
        (kind, _nested_code(cls.listen, "setup"), _nested_code(cls.listen, "function"))
        for kind, cls in (("progress", ProgressBar), ("multi", MultiProgressBar))
    ]


def _as_key(v):
    """A dask key back from msgpack: tuples arrive as lists."""
    return tuple(_as_key(x) for x in v) if isinstance(v, list) else v


def feed_setup(req):
    """What the Go scheduler needs to run a feed op (Scheduler.feed) itself:
    a feed whose setup and function are ProgressBar.listen's or
    MultiProgressBar.listen's closures (code objects equal to this
    distributed's: same source, same version) is a Progress or MultiProgress
    over the keys, `complete` and `group_by` its setup closes over; Go
    mirrors those plugins. Anything else is "generic": arbitrary Python that
    only a scheduler-side Python process can run. For a custom group_by,
    group_keys (the keys Go tracks) get their groups here."""
    setup = pickle_loads(req.setup) if req.setup else None
    function = pickle_loads(req.function) if req.function else None
    if req.teardown is not None:
        pickle_loads(req.teardown)  # a bad pickle fails here, as in Scheduler.feed
        return {"kind": "generic"}
    code = (getattr(setup, "__code__", None), getattr(function, "__code__", None))
    kind = next((k for k, s, f in _stock_feeds() if code == (s, f)), None)
    if kind is None:
        return {"kind": "generic"}
    cells = dict(zip(setup.__code__.co_freevars, (c.cell_contents for c in setup.__closure__ or ())))
    fields = {"kind": kind, "keys": list(cells["keys"]), "complete": bool(cells["complete"])}
    if kind == "multi":
        group_by = cells["group_by"]
        if group_by is key_split or (isinstance(group_by, str) and group_by == "prefix") or group_by is None:
            fields["group_by"] = "prefix"
        elif isinstance(group_by, str) and group_by == "spans":
            fields["group_by"] = "spans"
        else:
            fields["group_by"] = "custom"
            if req.group_keys is not None:
                fields["groups"] = [group_by(_as_key(k)) for k in req.group_keys]
    return fields
