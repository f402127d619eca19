"""Per-call time of the scalar queries of ``lidb.SortedList`` beside pygm's ``SortedList``.

Times 200K calls of ``bisect_left``, ``bisect_right``, ``x in sl``, ``find_le`` and ``count``
on random u64 keys (5M and 1M by default), queries half present keys and half random u64 (as
Python ints), each container built over the same keys. The libraries run alternately, round by
round, and the best round of each is printed as ns per call, with lidb/pygm ratios (below 1:
lidb is faster). The empty loop's own cost per iteration is printed too (it is inside every
figure). Not part of the test suite; pygm is an optional comparison (``pip install pygm``) and
without it only lidb's figures are printed.

    python python/bench/scalar_calls.py [--keys 5000000,1000000] [--calls 200000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import lidb

try:
    import pygm
except ImportError:  # the comparison is optional
    pygm = None


def _empty(sl, qs):
    for q in qs:
        pass


def _bisect_left(sl, qs):
    for q in qs:
        sl.bisect_left(q)


def _bisect_right(sl, qs):
    for q in qs:
        sl.bisect_right(q)


def _contains(sl, qs):
    for q in qs:
        q in sl


def _find_le(sl, qs):
    for q in qs:
        sl.find_le(q)


def _count(sl, qs):
    for q in qs:
        sl.count(q)


OPS = {
    "bisect_left": _bisect_left,
    "bisect_right": _bisect_right,
    "in": _contains,
    "find_le": _find_le,
    "count": _count,
}


def per_call_ns(fn, sl, qs) -> float:
    start = time.perf_counter_ns()
    fn(sl, qs)
    return (time.perf_counter_ns() - start) / len(qs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default="5000000,1000000")
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    for n in [int(s) for s in args.keys.split(",")]:
        keys = np.sort(rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True))
        present = rng.choice(keys, size=args.calls // 2).tolist()
        random = rng.integers(0, 2**64 - 1, size=args.calls - len(present), dtype=np.uint64)
        qs = present + random.tolist()
        order = rng.permutation(len(qs))
        qs = [qs[i] for i in order]
        libs = {"lidb": lidb.SortedList(keys)}
        if pygm is not None:
            libs["pygm"] = pygm.SortedList(keys)
        for name, sl in libs.items():  # both must answer alike before they are timed
            for q in qs[:1000]:
                assert sl.bisect_left(q) == libs["lidb"].bisect_left(q), (name, q)
        best = {(lib, op): float("inf") for lib in libs for op in OPS}
        loop = float("inf")
        for _ in range(args.rounds):
            loop = min(loop, per_call_ns(_empty, None, qs))
            for op, fn in OPS.items():
                for lib, sl in libs.items():
                    best[lib, op] = min(best[lib, op], per_call_ns(fn, sl, qs))
        print(f"{n} keys, {len(qs)} calls, best of {args.rounds}; empty loop {loop:.0f} ns/iter")
        for op in OPS:
            row = f"  {op:<13} lidb {best['lidb', op]:6.0f} ns"
            if pygm is not None:
                ratio = best["lidb", op] / best["pygm", op]
                row += f"   pygm {best['pygm', op]:6.0f} ns   lidb/pygm {ratio:.2f}"
            print(row)


if __name__ == "__main__":
    main()
