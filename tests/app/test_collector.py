"""proxy/serve/loop.py's settle_collector, in a fresh interpreter (it changes the process's collector):
start-up's objects frozen, the youngest pass later, and cyclic garbage still collected."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CODE = """
import gc, weakref
from proxy.serve.loop import YOUNG_COLLECTION_THRESHOLD, settle_collector
before = gc.get_threshold()
settle_collector()
print(gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, *before[1:]), gc.get_freeze_count() > 0)

class Node:
    pass

cycle = Node()
cycle.me = cycle
alive = weakref.ref(cycle)
del cycle
kept = [[] for _ in range(YOUNG_COLLECTION_THRESHOLD // 2)]  # not yet a young pass
print(alive() is not None)
kept += [[] for _ in range(YOUNG_COLLECTION_THRESHOLD)]
print(alive() is None)
"""


def test_settle_collector():
    out = subprocess.run([sys.executable, "-c", CODE], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True", "True"]
