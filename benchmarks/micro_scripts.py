#!/usr/bin/env python3
"""Micro-benchmark of what the cluster proxy adds to each EVAL to keep its body
(`proxy/backends/cluster/scripts.Known.saw_eval`), next to what hashing the body (SHA1, as a
SCRIPT LOAD or an eager design would) costs, by body size. Each EVAL's body arrives as a new
bytes object (as the request parser gives it), so its hash for the dictionary is computed once
per EVAL either way; the SHA1 is computed only when a NOSCRIPT asks for an unknown SHA.

    python benchmarks/micro_scripts.py [--number 200000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import hashlib
import timeit

from proxy.backends.cluster.scripts import Known


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    def best(statement) -> float:
        return min(timeit.repeat(statement, number=args.number, repeat=args.repeats)) / args.number

    for size in (64, 512, 4096):
        source = bytearray(b"x" * size)
        known = Known()
        known.saw_eval(bytes(source))
        base = best(lambda source=source: bytes(source))  # a new object, as the parser makes
        seen = best(lambda source=source, known=known: known.saw_eval(bytes(source))) - base
        sha = best(lambda source=source: hashlib.sha1(bytes(source)).hexdigest().encode()) - base
        print(f"body {size:5d} bytes: saw_eval (body seen before) {seen * 1e9:6.0f} ns/EVAL; "
              f"sha1 hexdigest {sha * 1e9:6.0f} ns")


if __name__ == "__main__":
    main()
