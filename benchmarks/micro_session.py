#!/usr/bin/env python3
"""Micro-benchmark of the whole Python path of a request, without sockets: CPU per request.

Clients' sessions over a standalone backend whose upstream connection is a fake (no socket: the
fakes of tests/session): each round, every client sends its requests (one GET or SET, or a pipeline of
16), the upstream connection's coalesced write is taken, and all the replies come back in one
upstream read, as they do at 50 clients. What it times is what the proxy's own code and hiredis
cost per request (reader, dispatch, policy, reply queue, reply splitter, monitoring), none of
the system calls: the part of `benchmarks/run.py`'s CPU per request that Python changes can
change, measured steadily enough to compare two checkouts on a noisy machine (run it from each;
take the best of several runs).

    python benchmarks/micro_session.py [--clients 50] [--rounds 400] [--policy FILE] [--cluster]

With `--cluster` the backend is a Redis Cluster's: three masters (a third of the slots each),
one fake connection to each, and every round's replies come back in one read per master.

Steadier still: instructions, not seconds. Under `valgrind --tool=callgrind`, two runs of one
case that differ only in `--rounds` differ by the instructions of those rounds alone:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python benchmarks/micro_session.py \
        --case GET-1 --repeats 1 --no-gc --rounds 40      # and again with --rounds 20

(with PYTHONHASHSEED=0, so that dictionaries are laid out alike in both runs).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import hiredis  # noqa: E402

from proxy.backends.cluster.connection import ClusterConnection  # noqa: E402
from proxy.backends.cluster.routing.slotmap import SlotMap  # noqa: E402
from proxy.backends.cluster.routing.slots import hash_slot  # noqa: E402
from proxy.commands.table import CommandTable  # noqa: E402
from proxy.config import NO_POLICY, Address, Config, Upstream  # noqa: E402
from proxy.monitor import live  # noqa: E402
from proxy.policy.building import build_engine  # noqa: E402
from proxy.serve.loop import settle_collector  # noqa: E402
from proxy.server import Proxy  # noqa: E402
from proxy.session.session import Session  # noqa: E402
from proxy.upstream.connection import READY  # noqa: E402
from tests.session.fakes import Transport, open_fakes  # noqa: E402

ADDRESS = Address("127.0.0.1", 7100)
MASTERS = [Address("127.0.0.1", 7200 + i) for i in range(3)]
RANGES = [(0, 5460, MASTERS[0], ()), (5461, 10922, MASTERS[1], ()), (10923, 16383, MASTERS[2], ())]
REPEATS = 7
COMMANDS = {
    "GET": (lambda i: (b"GET", b"bench:item:%012d:string" % i), b"$3\r\nxxx\r\n"),
    "SET": (lambda i: (b"SET", b"bench:item:%012d:string" % i, b"xxx", b"EX", b"3600"), b"+OK\r\n"),
    # run.py's --rejected SET: with a policy (--policy configs/policies/strict-dotted.yaml) it breaks
    # five rules and the proxy answers it itself; nothing goes upstream (--case BAD-1, BAD-16).
    "BAD": (lambda i: (b"SET", b"BadKey%d" % i, b"xxx"), None),
}
# Only with --case (PING-1, PING-16): PING, forwarded like any read (Redis answers it: BUSY during a
# long script, counted in SLOWLOG and INFO commandstats).
LEARN = False  # --learn
EXTRA = {"PING": (lambda i: (b"PING",), b"+PONG\r\n")}


def build(policy: Path | None):
    loop = asyncio.new_event_loop()
    config = Config(upstream=Upstream(ADDRESS), shared_connections=1,
                    policy=str(policy) if policy is not None else NO_POLICY, upstream_acl=False)
    table = CommandTable.from_snapshot()
    table.from_server = True
    proxy = Proxy(loop, config, table, engine=build_engine(config.policy, table))
    if LEARN:  # serve --learn: the learner in the sessions' shadow slot
        from proxy.infer.traffic import Learner

        proxy.shadow = Learner(table)
    opened = []
    open_fakes(proxy.backend, loop, ADDRESS, opened)
    return loop, proxy, opened


def build_cluster(policy: Path | None):
    """A proxy in front of three masters, one shared fake connection to each."""
    loop = asyncio.new_event_loop()
    seeds = tuple(Upstream(node) for node in MASTERS)
    config = Config(upstream=seeds[0], upstream_cluster=seeds, shared_connections=1,
                    policy=str(policy) if policy is not None else NO_POLICY, upstream_acl=False)
    table = CommandTable.from_snapshot()
    table.from_server = True
    proxy = Proxy(loop, config, table, databases=1, engine=build_engine(config.policy, table))
    router = proxy.backend.router
    router.request_refresh = lambda: None
    router._use(SlotMap.from_ranges(RANGES, []))
    opened = []
    for node in MASTERS:
        conn = ClusterConnection(loop, node, [], None, router=router, place=(2, 0))
        conn.transport = Transport()
        conn.write = conn.transport.write  # what connection_made binds
        conn.state = READY
        router.pool(node, 2).connections[0] = conn
        opened.append(conn)
    return loop, proxy, opened


def run_ticks(loop) -> None:
    """What the event loop would run at the end of the tick: the coalesced upstream writes."""
    ready = loop._ready
    while ready:
        ready.popleft()._run()


def measure(policy, clients: int, rounds: int, name: str, pipeline: int, repeats: int = REPEATS,
            collect: bool = True, check: bool = False, cluster: bool = False) -> float:
    make, reply = {**COMMANDS, **EXTRA}[name]
    loop, proxy, opened = build_cluster(policy) if cluster else build(policy)
    sessions, outs = [], []  # (a cluster session writes to its transport through a wrapper)
    for _ in range(clients):
        session = Session(proxy)
        transport = Transport()
        session.connection_made(transport)
        sessions.append(session)
        outs.append(transport.out)
    # Keys spread like redis-benchmark's `-r 100000` (over a cluster's masters too), all as long.
    requests = [b"".join(hiredis.pack_command(make((c * 1000 + k) * 2654435761 % 100000)) for k in range(pipeline))
                for c in range(clients)]
    replies = reply * (clients * pipeline) if reply is not None else None
    pairs = list(zip(sessions, requests))
    settle_collector()  # as `redis-guard serve` does once started
    live.SLOW_SECONDS = 3600.0  # under valgrind every request would pass the slow log's threshold
    if not collect:
        gc.disable()  # instruction counts that do not depend on when a collection happens
    best = float("inf")
    answers: dict = {}  # a master's answer by the size of what it was sent (answer_masters)
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(rounds):
            for session, request in pairs:
                session.data_received(request)
            run_ticks(loop)
            if cluster:
                answer_masters(opened, reply, answers, requests if check else None)
            else:
                if replies is None:  # refused by the proxy: nothing went upstream (no connection opened)
                    assert not any(conn.transport.out for conn in opened), "a refused request was forwarded"
                else:
                    conn = opened[-1]
                    if check and conn.transport.out:  # every request went upstream as sent
                        assert b"".join(conn.transport.out) == b"".join(requests), "requests not forwarded as sent"
                    if conn.transport.out:
                        conn.transport.out.clear()
                        conn.data_received(replies)
            for out in outs:
                if check:
                    if reply is None:
                        assert b"".join(out).count(b"\r\n") == pipeline, "refusals not delivered"
                    else:
                        assert b"".join(out) == reply * pipeline, "replies not delivered"
                out.clear()
        best = min(best, time.perf_counter() - started)
    loop.close()
    return best / (rounds * clients * pipeline) * 1e9


def answer_masters(conns, reply: bytes, answers: dict, requests=None) -> None:
    """Each master answers what it was sent in one read (its requests counted by their headers:
    the benchmark's commands have fewer than ten arguments). Every request of a case has the same
    length, so a master's answer is known by the size of what it was sent: `answers` keeps it,
    so that the proxy's figure does not carry the counting (a tenth of it at `-P 16`). With
    `requests`, check that every request reached the master that owns its key, once."""
    received = []
    for conn, (low, high, _node, _replicas) in zip(conns, RANGES):
        out = conn.transport.out
        if requests is not None:
            commands = hiredis.Reader()
            commands.feed(b"".join(out))
            while (command := commands.gets()) is not False:
                assert low <= hash_slot(command[1]) <= high, f"{command} sent to the master of {low}-{high}"
                received.append(command)
        if out:
            size = len(out[0]) if len(out) == 1 else sum(map(len, out))
            answer = answers.get(size)
            if answer is None:
                answer = answers[size] = reply * (out[0] if len(out) == 1 else b"".join(out)).count(b"*")
            out.clear()
            conn.data_received(answer)
    if requests is not None:
        sent = hiredis.Reader()
        sent.feed(b"".join(requests))
        assert sorted(received) == sorted(iter(sent.gets, False)), "requests not forwarded once each"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--policy", type=Path, default=None, help="a policy file (default: none)")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each case; the best counts")
    parser.add_argument("--check", action="store_true", help="check every request and reply (a smoke test)")
    parser.add_argument("--no-gc", action="store_true", help="no cyclic collection while measuring")
    parser.add_argument("--case", default=None, help="one case only, e.g. GET-1 or SET-16 (--rounds as given)")
    parser.add_argument("--cluster", action="store_true", help="in front of a cluster of three masters")
    parser.add_argument("--learn", action="store_true", help="with serve --learn's learner recording")
    args = parser.parse_args()
    global LEARN
    LEARN = args.learn
    print(f"ns of Python per request, best of {args.repeats}, {args.clients} clients, replies in one upstream read"
          + (" per master" if args.cluster else "") + (f", policy {args.policy.name}" if args.policy else "")
          + (", learning" if args.learn else ""))
    for pipeline in (1, 16):
        for name in [*COMMANDS, *EXTRA] if args.case else COMMANDS:
            if name == "BAD" and args.case is None and args.policy is None:
                continue  # refused only under a policy
            if args.case is not None and args.case != f"{name}-{pipeline}":
                continue
            rounds = args.rounds if args.case else max(1, args.rounds // pipeline)
            ns = measure(args.policy, args.clients, rounds, name, pipeline, args.repeats, not args.no_gc, args.check,
                         args.cluster)
            print(f"{name} -P {pipeline:<2}: {ns:7.0f} ns per request")


if __name__ == "__main__":
    main()
