"""Print hash(key) and str(key) for a few hundred dask keys, one JSON object
per line: {"key": <keycodec>, "hash": int, "str": str(key)}.

Run under a fixed PYTHONHASHSEED (the Go tests use 0 and 3141592653):
pyhash.go must reproduce CPython's hash() of str (all three internal
widths), int, float and nested tuples exactly, since set iteration order
follows from it.
"""

import json
import os
import random
import sys

from keycodec import encode_key

if not os.environ.get("PYTHONHASHSEED", "").isdigit():
    sys.exit("gen_hashes.py: run with PYTHONHASHSEED set to a number (the Go test uses 0 and one other seed)")


def keys():
    rng = random.Random(1234)
    out = ["", "a", "ab", "abcdefg", "abcdefgh", "abcdefghi", "x" * 100, "inc-1", "sum-aggregate-9f8e7d",
           "é", "café", "naïve-ÿ", "\x00", "\x7f\x80", "€", "Ω-omega", "日本語のキー", "\uffff",
           "\U0001F600", "a\U0001F600b", "é€\U00010000", "\U0010FFFF", "tab\tnew\nline", "quote'\"",
           "back\\slash", "\u00a0nbsp", "\u200bzwsp", "\u0085nel", "\u2028ls"]
    for n in range(0, 40):
        out.append("".join(chr(rng.randrange(32, 127)) for _ in range(n)))
    for n in range(1, 20):
        out.append("".join(chr(rng.randrange(0xa0, 0x100)) for _ in range(n)))
        out.append("".join(chr(rng.choice([rng.randrange(0x100, 0xd800), rng.randrange(0x20, 0x7f)]))
                           for _ in range(n)))
        out.append("".join(chr(rng.choice([rng.randrange(0x10000, 0x110000), rng.randrange(0x20, 0x7f)]))
                           for _ in range(n)))
    ints = [0, 1, -1, -2, 2, 7, 127, 128, 255, 256, -32, -33, -128, -129, 65535, 65536, 2**31 - 1, 2**31, -2**31,
            2**32, 2**61 - 2, 2**61 - 1, 2**61, 2**61 + 1, 2**62, 2**63 - 1, -2**63, -2**63 + 1,
            2**63, 2**64 - 1, 2**64 - 2, -(2**61 - 1), -(2**61), -(2**61) - 1, -(2**61) + 1]
    ints += [rng.randrange(-2**63, 2**64) for _ in range(40)]
    out += ints
    floats = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, -2.5, 0.1, 1e16, 1e-5, 1e300, -1e300, 5e-324, 2.0**61,
              2.0**62, 2.0**63, 2.0**64, 2.0**-1074, float("inf"), float("-inf"), 3.141592653589793, 1e22]
    floats += [rng.uniform(-1e6, 1e6) for _ in range(20)] + [rng.random() * 2**rng.randrange(-60, 60) for _ in range(20)]
    out += floats
    out += [(), ("x",), ("x", 0), ("x", 0, 1), ("x-abc", 3, 2.5), (1, 2), ((1, 2), 3), ("a", ("b", ("c", -1))),
            ("é", "€", "\U0001F600"), (0.0,), (-1,), (2**64 - 1, -2**63), (("nested",),), ("quote'", 'dq"', "both'\"")]
    for _ in range(60):
        name = "".join(rng.choice("abcdef-0123456789") for _ in range(rng.randrange(1, 30)))
        out.append((name,) + tuple(rng.randrange(-5, 1000) for _ in range(rng.randrange(0, 4))))
    return out


for k in keys():
    print(json.dumps({"key": encode_key(k), "hash": hash(k), "str": str(k)}, ensure_ascii=True))
