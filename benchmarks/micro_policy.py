#!/usr/bin/env python3
"""Micro-benchmark of what a policy adds to the proxy's per-command loop, without sockets.

Runs `Session._run` (the dispatch loop every client batch goes through: policy check, command
action, forward) over pipelines of 16 commands on random keys, with the passthrough policy and
with a policy file (the strictest preset by default), and prints nanoseconds per command. Only
the upstream write is left out. Unlike `run.py` this does not depend on the machine's other
load, so it shows changes of a few tens of nanoseconds.

    python benchmarks/micro_policy.py [--policy FILE] [--keys N] [--shadow FILE]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from proxy.backends.route import Route  # noqa: E402
from proxy.commands.table import CommandTable  # noqa: E402
from proxy.policy.decision import SessionState  # noqa: E402
from proxy.policy.engine import Engine, passthrough_engine  # noqa: E402
from proxy.policy.loader import load_policy  # noqa: E402
from proxy.policy.shadow import ShadowPolicy  # noqa: E402
from proxy.resp.reader import Batch  # noqa: E402
from proxy.session import session as session_module  # noqa: E402
from proxy.session.behaviour import (  # noqa: E402
    PASS,
    STANDALONE,
    Behaviour,
    counted,
    counted_unknown,
    dispatch_table,
    lane_tables,
)
from proxy.session.session import Session, one_unit_names  # noqa: E402
from proxy.session.states import SHARED, ConnState  # noqa: E402

PIPELINE = 16
ROUNDS = 5
COMMANDS = {
    "SET": lambda key: [b"SET", key, b"xxx", b"EX", b"3600"],
    "GET": lambda key: [b"GET", key],
}



class NoRoute(Route):
    def forward(self, session, batch, start, stop) -> None:
        # The upstream write is not what is measured: the replies are taken as arrived at once
        # (the reply window stays open).
        session.units_out = 0


def session(engine: Engine, actions, shadow=None) -> Session:
    client = Session.__new__(Session)  # no proxy, no transport: only what _run reads (no __init__)
    client.proxy = SimpleNamespace(shadow=shadow)
    client.app = client.peer = None
    client.engine = engine
    client.good_keys, client.key_classes, client.good_class = engine.good_keys, engine.key_classes, None  # as `bind`
    client.shadow = shadow
    client.plans = engine.plans
    client.policy_state = SessionState()
    client.dispatch = counted(dispatch_table(actions, engine.plans))  # as `Server.dispatch_for` makes it
    client.unknown = counted_unknown(PASS)
    client.state = ConnState()
    client.route = NoRoute()
    return client


def per_command(client: Session, batches) -> float:
    """Best of ROUNDS passes over `batches`, in ns per command."""
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for batch in batches:
            client._run(batch, 0)
        best = min(best, time.perf_counter() - started)
    return best / (len(batches) * PIPELINE) * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", type=Path, default=REPO / "configs" / "policies" / "strict-dotted.yaml")
    parser.add_argument("--keys", type=int, default=100_000, help="random keys, as redis-benchmark -r")
    parser.add_argument("--batches", type=int, default=20_000)
    parser.add_argument("--shadow", type=Path, help="also measure this shadow policy next to --policy "
                        "(`shadow_policy:`; e.g. the same file: the cost of a candidate that passes everything)")
    args = parser.parse_args()
    table = CommandTable.from_snapshot()
    session_module.ONE_UNIT = one_unit_names(table)  # as the Proxy sets it (the reply window's units)
    actions = lane_tables(Behaviour(table), STANDALONE)[SHARED]
    off = passthrough_engine(table)
    rng = random.Random(1)
    print(f"ns per command in Session._run, pipelines of {PIPELINE}, {args.keys:,} keys; "
          f"policy: {args.policy.name}")
    for name, build in COMMANDS.items():
        # Only the commands: the route writes nothing, so no bytes.
        batches = [Batch([build(b"bench:item:%012d:string" % rng.randrange(args.keys)) for _ in range(PIPELINE)],
                         b"", []) for _ in range(args.batches)]
        on = Engine(load_policy(args.policy), table)  # fresh: the first pass fills its caches
        without = per_command(session(off, actions), batches)
        with_policy = per_command(session(on, actions), batches)
        line = f"{name}: {without:6.0f} without, {with_policy:6.0f} with the policy (+{with_policy - without:.0f})"
        if args.shadow is not None:
            shadow = ShadowPolicy(Engine(load_policy(args.shadow), table))
            with_shadow = per_command(session(Engine(load_policy(args.policy), table), actions, shadow), batches)
            line += f", {with_shadow:6.0f} with the shadow policy too (+{with_shadow - with_policy:.0f})"
        print(line)

    print(scripts_line(table, args.policy, args.batches * PIPELINE))


def scripts_line(table, policy: Path, calls: int) -> str:
    """The engine's decision on EVALSHA (and EVAL of the body) of an approved script (rule C6
    `scripts: approved`: a SHA lookup and the rewrite into EVAL), against `scripts: declared` (the
    declared keys' check alone), in ns per call. Each call gets a fresh copy of its arguments, as
    the parser makes them (bytes cache their hash)."""
    import hashlib

    from proxy.policy.loader import load_policy_text
    from proxy.policy.rules._scripts import BUILTIN_DIR

    body = (BUILTIN_DIR / "redis-py-lock-release.lua").read_bytes()
    sha = hashlib.sha1(body).hexdigest().encode()
    text = policy.read_text(encoding="utf-8")
    declared = text.replace("C6: {scripts: approved}", "C6: {scripts: declared}")
    key = b"user:basic.lock:42:string"
    timings = []
    for variant in (text, declared):
        engine = Engine(load_policy_text(variant, str(policy), table), table)
        for first, second in ((b"EVALSHA", sha), (b"EVAL", body)):
            calls_args = [[first, bytes(bytearray(second)), b"1", key, b"token"] for _ in range(calls)]
            plan = engine.plan_for(calls_args[0])
            state = SessionState()
            decide = engine.decide
            best = float("inf")
            for _ in range(ROUNDS):
                started = time.perf_counter()
                for call in calls_args:
                    decide(plan, call, (), state)
                best = min(best, time.perf_counter() - started)
            timings.append(best / calls * 1e9)
    approved_sha, approved_body, declared_sha, declared_body = timings
    return (f"EVALSHA: {approved_sha:6.0f} approved (sent as EVAL), {declared_sha:6.0f} declared "
            f"(+{approved_sha - declared_sha:.0f}); EVAL of the body: {approved_body:6.0f} approved, "
            f"{declared_body:6.0f} declared (+{approved_body - declared_body:.0f}) ns per engine decision")


if __name__ == "__main__":
    main()
