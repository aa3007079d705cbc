"""Random set/frozenset operation sequences run by CPython, for pyset.go.

Run under PYTHONHASHSEED=0. Output, JSON lines: first {"keys": [...]}, the
key universe (keycodec form); then one object per operation:

    {"op": name, "a": i, "b": j, "dst": d, "key": k, "keys": [...],
     "ret": value, "len": n, "digest": "...", "list": [...]}

Sets live in numbered registers; a, b are operand registers, dst the
register written, key/keys indices into the universe. After each operation
the script prints list(dst) as len + an FNV-1a digest of the key indices in
iteration order (+ the list itself when short), which Go must reproduce.
Operations mirror what dask.order and its helpers do: add, discard, remove,
pop, set(x), x.copy(), frozenset(x), a set display built by .add (Task's
dependencies), difference with a set, a frozenset or a dict (both of
CPython's algorithms), -, &, intersection, update, issubset.
"""

import json
import os
import random
import sys

from keycodec import encode_key

if os.environ.get("PYTHONHASHSEED") != "0":
    sys.exit("gen_setops.py: run with PYTHONHASHSEED=0")

rng = random.Random(20260807)


def universe():
    keys = []
    keys += list(range(0, 100000))  # dense ints: large tables, the >50000 growth rule
    keys += [rng.randrange(-2**63, 2**63) for _ in range(2000)]
    keys += [f"x-{i}" for i in range(3000)]
    keys += [("sum-chunk-abc", i, j) for i in range(40) for j in range(40)]
    keys += ["".join(rng.choice("αβγδεabc-€😀") for _ in range(rng.randrange(1, 8))) for _ in range(500)]
    keys += [i + 0.5 for i in range(500)]
    keys += [f"k{i}" for i in range(100000)]  # for big tables whose layout depends on their size
    out, seen = [], set()
    for k in keys:  # distinct under Python equality
        if k not in seen:
            seen.add(k)
            out.append(k)
    return out


KEYS = universe()
INDEX = {k: i for i, k in enumerate(KEYS)}
MASK = 2**64 - 1


def digest(s):
    h = 14695981039346656037
    for k in s:
        h = ((h ^ INDEX[k]) * 1099511628211) & MASK
    return str(h)


regs = {}


def emit(op, dst=None, **kw):
    rec = {"op": op, **kw}
    if dst is not None:
        rec["dst"] = dst
        s = regs[dst]
        rec["len"] = len(s)
        rec["digest"] = digest(s)
        if len(s) <= 64:
            rec["list"] = [INDEX[k] for k in s]
    print(json.dumps(rec))


def scenario(pool, nregs, steps):
    """Random operations on nregs registers over keys drawn from pool."""
    base = len(regs)
    for r in range(base, base + nregs):
        regs[r] = set()
        emit("new", r)
    rs = list(range(base, base + nregs))
    for _ in range(steps):
        op = rng.choices(
            ["add", "discard", "remove", "pop", "copy", "set", "frozen", "display", "diff", "difffrozen",
             "diffdict", "sub", "and", "inter", "update", "issubset", "bulkadd", "bulkdiscard"],
            weights=[30, 12, 4, 6, 2, 2, 3, 3, 4, 3, 5, 2, 3, 2, 2, 2, 4, 3])[0]
        a, b, d = rng.choice(rs), rng.choice(rs), rng.choice(rs)
        sa = regs[a]
        mutable = isinstance(sa, set)
        if op in ("add", "discard", "remove", "pop", "update", "bulkadd", "bulkdiscard") and not mutable:
            op = "set"  # thaw it
        if op == "add":
            k = rng.choice(pool)
            sa.add(k)
            emit("add", a, key=INDEX[k])
        elif op == "discard":
            k = rng.choice(list(sa)) if sa and rng.random() < 0.7 else rng.choice(pool)
            sa.discard(k)
            emit("discard", a, key=INDEX[k])
        elif op == "remove":
            if sa:
                k = rng.choice(list(sa))
                sa.remove(k)
                emit("discard", a, key=INDEX[k])
        elif op == "pop":
            if sa:
                k = sa.pop()
                emit("pop", a, ret=INDEX[k])
        elif op == "copy":
            regs[d] = sa.copy()  # a frozenset's copy() is itself
            emit("copy", d, a=a)
        elif op == "set":
            regs[d] = set(sa)
            emit("set", d, a=a)
        elif op == "frozen":
            regs[d] = frozenset(sa)  # frozenset(frozenset) is itself
            emit("frozen", d, a=a)
        elif op == "display":
            ks = [rng.choice(pool) for _ in range(rng.choice([1, 1, 2, 2, 3, 4, 5, 6, 9, 17, 40]))]
            s = {ks[0]}
            for k in ks[1:]:
                s.add(k)
            regs[d] = frozenset(s)
            emit("display", d, keys=[INDEX[k] for k in ks])
        elif op in ("diff", "difffrozen", "sub"):
            other = regs[b] if op != "difffrozen" else frozenset(regs[b])
            regs[d] = sa.difference(other) if op != "sub" else sa - other
            emit("diff", d, a=a, b=b)
        elif op == "diffdict":
            n = rng.choice([0, 0, 1, 2, 3, 5, 10, 50, 300])
            dk = [rng.choice(pool) for _ in range(n)]
            regs[d] = sa.difference(dict.fromkeys(dk))
            emit("diffdict", d, a=a, keys=[INDEX[k] for k in dk])
        elif op in ("and", "inter"):
            regs[d] = sa & regs[b] if op == "and" else sa.intersection(regs[b])
            emit("and", d, a=a, b=b)
        elif op == "update":
            sa.update(regs[b])
            emit("update", a, b=b)
        elif op == "issubset":
            emit("issubset", a=a, b=b, ret=sa.issubset(regs[b]))
        elif op == "bulkadd":
            ks = [rng.choice(pool) for _ in range(rng.randrange(1, 200))]
            for k in ks:
                sa.add(k)
            emit("bulkadd", a, keys=[INDEX[k] for k in ks])
        elif op == "bulkdiscard":
            ks = rng.sample(list(sa), min(len(sa), rng.randrange(1, 100))) if sa else []
            for k in ks:
                sa.discard(k)
            emit("bulkdiscard", a, keys=[INDEX[k] for k in ks])


print(json.dumps({"keys": [encode_key(k) for k in KEYS]}))
ints = list(range(0, 100000))
strs = [k for k in KEYS if isinstance(k, str)]
bigstrs = KEYS[-100000:]
mixed = KEYS[100000:-100000]
scenario(ints[:24], 5, 3000)  # tiny pool: many collisions, dummies, pops
scenario(strs[:40], 5, 3000)
scenario(mixed[:64], 6, 3000)
scenario(mixed, 6, 3000)
scenario(strs + ints[:500], 4, 1500)


def big():
    """Tables past 50000 keys, where growth switches from used*4 to used*2."""
    r = len(regs)
    regs[r] = set()
    emit("new", r)
    ks = rng.sample(bigstrs, 90000)  # grows past 78643 used: a resize to used*2
    for k in ks:
        regs[r].add(k)
    emit("bulkadd", r, keys=[INDEX[k] for k in ks])
    gone = rng.sample(ks, 60000)
    for k in gone:
        regs[r].discard(k)
    emit("bulkdiscard", r, keys=[INDEX[k] for k in gone])
    for _ in range(5):
        k = regs[r].pop()
        emit("pop", r, ret=INDEX[k])
    regs[r + 1] = set(regs[r])
    emit("set", r + 1, a=r)
    regs[r + 2] = frozenset(regs[r])
    emit("frozen", r + 2, a=r)
    dk = rng.sample(bigstrs, 3000)
    regs[r + 3] = regs[r].difference(dict.fromkeys(dk))
    emit("diffdict", r + 3, a=r, keys=[INDEX[k] for k in dk])
    regs[r + 4] = regs[r + 2].difference(dict.fromkeys(dk[:100]))
    emit("diffdict", r + 4, a=r + 2, keys=[INDEX[k] for k in dk[:100]])


big()
