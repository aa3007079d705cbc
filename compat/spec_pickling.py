"""How the materializer helper pickles a graph's task specs (materializer.py
materialize): whole, as distributed's dumps pickles a task Python's scheduler
sends, or with their callables and bulky values as references into a
per-graph object table, each distinct one pickled once per graph instead of
once per task. protocol/pickle/splice.go on the Go side turns the references
back into what a stock worker loads. Embedded in the Go binary and sent to
the helper with materializer.py (compat/materializer_proc.go).
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import sys
import types

from distributed.protocol.pickle import dumps as pickle_dumps

import helper_wire as wire

# The callables a task pickle refers to in the object table: pickled once
# per graph instead of once per task. Functions defined in
# __main__ (pickled by value by cloudpickle), bound methods (which carry
# their whole object) and partials are what made per-task pickling slow.
INTERNED_TYPES = frozenset(
    {types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial}
)

# Bulky values go to the object table too, by identity: a bytes object or a
# numpy array that many tasks share (client.map(f, xs, [blob] * n), a
# lookup table passed to every task) is pickled once per graph instead of
# once per task, and crosses the pipe to Go once. With 5,000 tasks sharing
# 64 KiB this helper pickled and sent 320 MB, for three seconds in which
# every other client's graph waited. Go splices the value back into each
# task's payload when it sends the task, as for the callables.
BULKY_MIN_BYTES = 4096

# MemoSpecPickler copies its pre-populated memo into each task's pickle:
# beyond this many distinct callables in a graph, the persistent ids of
# SpecPickler cost less. 0 sends every graph's specs with persistent ids
# (tests and benchmarks compare the two forms).
MEMO_TABLE_MAX = int(os.environ.get("DASKGO_MATERIALIZER_MEMO_TABLE_MAX", "64"))


def table_types():
    """The types persistent_id looks at: one set lookup per pickled object
    (persistent_id runs for every object of every task, so a test per
    object is on the graph path's hottest loop). numpy's ndarray is in it
    when numpy is loaded: a graph holding arrays imported it while its
    expression was unpickled, before the pickler is made."""
    types_ = set(INTERNED_TYPES) | {bytes, bytearray}
    np = sys.modules.get("numpy")
    if np is not None:
        types_.add(np.ndarray)
    return frozenset(types_)


class ObjectTable:
    """The callables and bulky values of one graph, each pickled once, by
    index. The objects are kept alive until the graph is answered, so their
    id()s stay unique."""

    def __init__(self):
        self.index_of = {}
        self.objects = []
        self.new = []  # pickles not sent yet

    def index(self, obj):
        i = self.index_of.get(id(obj))
        if i is None:
            blob = pickle_dumps(obj)  # by value (cloudpickle) where distributed would
            i = len(self.objects)
            self.index_of[id(obj)] = i
            self.objects.append(obj)
            self.new.append(blob)
        return i

    def take_new(self):
        new, self.new = self.new, []
        return new


class ReusedPickler(pickle.Pickler):
    """The C pickler over one buffer, both kept from task to task."""

    def __init__(self):
        self._buf = io.BytesIO()
        super().__init__(self._buf, protocol=5)

    def pickled(self, node):
        """node pickled with the memo as the caller set it."""
        buf = self._buf
        buf.seek(0)
        buf.truncate()
        self.dump(node)
        return buf.getvalue()


class SpecPickler(ReusedPickler):
    """Pickles one GraphNode at a time with the C pickler, its callables and
    bulky values as persistent ids into the ObjectTable (protocol/pickle/splice.go puts them
    back for the worker)."""

    def __init__(self, table):
        super().__init__()
        self._table = table
        self._types = table_types()

    def persistent_id(self, obj):
        t = type(obj)
        if t not in self._types:
            return None
        if t in INTERNED_TYPES or (obj.nbytes if t not in (bytes, bytearray) else len(obj)) >= BULKY_MIN_BYTES:
            return self._table.index(obj)
        return None

    def spec(self, node):
        self.clear_memo()
        try:
            return self.pickled(node)
        except Exception:
            # what the plain pickler cannot do (a class defined in __main__,
            # say) distributed's pickle does, by value and without the table
            return pickle_dumps(node)


class _NewCallable(Exception):
    """A callable MemoSpecPickler's memo does not hold yet."""


class MemoSpecPickler(ReusedPickler):
    """Pickles one GraphNode at a time like SpecPickler, faster: the table's
    callables reach the pickle as gets of a memo pre-populated with them (at
    wire.TABLE_MEMO_BASE + their table index), so there is no Python call
    per pickled object, only a memo probe. pickle consults reducer_override
    only for objects without a fast path, after the memo; a callable it
    meets there is new to the table, and the task is pickled again with it.
    The task's own memo entries are numbered from the count of
    pre-populated ones, the memo base sent with each spec, which Go's
    pickle.Prepare takes off.

    Bulky values do not reach reducer_override (bytes have a fast path):
    a spec that comes out bulky is for SpecPickler. Each task copies the
    pre-populated memo in, so past MEMO_TABLE_MAX distinct callables (a
    partial per task, say) the pickler says it is full and the rest of
    the graph goes through SpecPickler.

    On a 20k-task client.map its specs cost 3.98 µs a task against
    SpecPickler's 4.99, and pickle.dumps' 4.04 (what Python's scheduler pays
    per task it sends); the whole materialize 9.07 against 10.33
    (scripts/bench/helper_map_stages.py, results in
    scripts/bench/results/per-message/helper-map/memo-gets/)."""

    def __init__(self, table):
        super().__init__()
        self._table = table
        self._base = {}  # id(callable) -> (TABLE_MEMO_BASE + table index, callable)
        self.full = False

    def reducer_override(self, obj):
        if type(obj) in INTERNED_TYPES:
            raise _NewCallable(obj)
        return NotImplemented

    def spec(self, node):
        """(pickle, memo base), or None once full."""
        while True:
            self.memo = self._base
            try:
                return self.pickled(node), len(self._base)
            except _NewCallable as e:
                if len(self._base) >= MEMO_TABLE_MAX:
                    self.full = True
                    return None
                obj = e.args[0]
                self._base[id(obj)] = (wire.TABLE_MEMO_BASE + self._table.index(obj), obj)
                continue
            except Exception:
                # as SpecPickler: what the plain pickler cannot do,
                # distributed's pickle does, by value and without the table
                return pickle_dumps(node), 0


class GraphSpecs:
    """How each spec of one graph is pickled: whole (distributed's dumps)
    when the graph is small and the spec is not bulky, else through the
    object table, with MemoSpecPickler while its memo has room and the spec
    is not bulky, else with SpecPickler."""

    def __init__(self, table, plain):
        self.plain = plain
        self._pickler = SpecPickler(table)
        self._memo_pickler = MemoSpecPickler(table)

    def spec(self, node):
        """(pickle, memo base)"""
        if self.plain:
            spec = pickle_dumps(node)
            if len(spec) < BULKY_MIN_BYTES:
                return spec, 0
            # it may hold a value other tasks share: into the table
        elif not self._memo_pickler.full:
            got = self._memo_pickler.spec(node)
            if got is not None and len(got[0]) < BULKY_MIN_BYTES:
                return got
        return self._pickler.spec(node), 0
