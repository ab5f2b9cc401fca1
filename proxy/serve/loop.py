"""The event loop every command of the proxy runs on (uvloop's), and the cyclic collector's
settings once start-up is done: what start-up built is frozen out of its sight and its youngest
pass waits longer (measured: benchmarks/README.md, "Figures behind the code")."""

from __future__ import annotations

import asyncio
import gc

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency; this keeps pdb sessions simple
    uvloop = None

# Container objects allocated, net of those freed, before the cyclic collector's youngest pass.
# In flight, a cluster client's pipeline over several masters holds a couple of dozen of them (its
# commands, Scatter, Parts, reply chunks) until its replies are in, so 50 such clients keep
# Python's default of 700 crossed and the passes walking what is in flight (measured:
# benchmarks/README.md, "Figures behind the code"). Nearly everything the proxy makes is freed by reference
# counts; what cycles there are (an exception's traceback) wait for 50,000 allocations instead.
YOUNG_COLLECTION_THRESHOLD = 50_000


def settle_collector() -> None:
    """Once start-up is done: what it built (the command table, the policy's compiled plans)
    lives as long as the process, so it is frozen out of the cyclic collector's sight (its full
    passes stopped walking it, a measured share of the CPU at -P 16), and the youngest
    pass waits for YOUNG_COLLECTION_THRESHOLD allocations."""
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)


def new_loop():
    """A new event loop: uvloop's where it is installed."""
    return uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()


def run(coroutine):
    """The coroutine's result, run on a loop of its own (a start-up step before the proxy's)."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coroutine)
