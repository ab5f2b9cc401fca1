"""No reply reaches the wrong client, whatever the mix: 16 clients (half RESP2, half RESP3) send random
commands from the command table at once through the passthrough proxy, each checking that its
markers come back to it in order and that no reply carries another client's bytes, and every
reply is compared with what the same client's sequence gets from a second redis-server directly
(`randomclients.py` says how). Seeded: set RG_ISOLATION_SEED to replay a failure (the seed is in
every failure message); RG_ISOLATION_STEPS sets the steps per client.
"""

import asyncio
import os
import random

import pytest

from tests.commands.arguments import CommandDocs
from tests.integration import randomclients
from tests.integration.randomclients import BYTES, NONE, Outcome, Planner, Step
from tests.servers import PASSTHROUGH, ProxyProcess, RedisServer

CLIENTS = 16
STEPS = int(os.environ.get("RG_ISOLATION_STEPS", "500"))


def seed_for_run() -> int:
    return int(os.environ.get("RG_ISOLATION_SEED") or random.SystemRandom().randrange(1, 10**9))


@pytest.fixture(scope="module")
def docs():
    return CommandDocs.from_snapshot()


@pytest.fixture(scope="module", params=["compiled", "pure"])
def behind_proxy(request):
    """The proxy as installed (its compiled hot path, where built), and with the pure-Python
    modules that are its reference (proxy/compiled.py)."""
    server = RedisServer()
    proxy = ProxyProcess(server.url, PASSTHROUGH, env={"REDIS_GUARD_PURE_PYTHON": "1"} if request.param == "pure" else {})
    expected = ("hot path pure Python" if request.param == "pure" else
                "hot path compiled" if os.environ.get("REDIS_GUARD_EXPECT_COMPILED") else "hot path ")
    assert expected in proxy.log, proxy.log
    randomclients.prepare(server.port)
    yield proxy
    proxy.stop()
    server.close()


@pytest.fixture(scope="module")
def reference(behind_proxy):
    """A fresh server for each proxy: the same sequences, the same starting state."""
    server = RedisServer()
    randomclients.prepare(server.port)
    yield server
    server.close()


def run_and_compare(port: int, reference_port: int, planner: Planner, seed: int, clients: int, steps: int):
    plans = [randomclients.plan(planner, client, seed, steps) for client in range(clients)]
    protocols = [2 if client % 2 == 0 else 3 for client in range(clients)]
    where = f"(seed {seed}: RG_ISOLATION_SEED={seed} to replay)"
    try:
        got = randomclients.run_clients(port, plans, protocols, seed)
    except randomclients.IsolationError as exc:
        raise AssertionError(f"{exc} {where}") from None
    expected = randomclients.run_clients(reference_port, plans, protocols, seed)
    randomclients.as_presented(planner.mode, plans, expected)
    problems = randomclients.compare(plans, got, expected)
    assert not problems, f"{len(problems)} replies differ from Redis's own {where}:\n" + "\n".join(problems[:15])
    compared = sum(step.check != NONE for plan in plans for step in plan)
    assert compared > clients * steps // 2, f"only {compared} steps compared {where}"
    return plans


def test_random_clients_through_proxy(behind_proxy, reference, docs):
    seed = seed_for_run()
    print(f"seed {seed}")
    plans = run_and_compare(behind_proxy.port, reference.port, Planner(docs), seed, CLIENTS, STEPS)
    sent = {name for plan in plans for step in plan for name in step.names}
    # The mix moved clients between shared and own connections many times.
    assert {"select", "hello", "multi", "subscribe", "blpop", "eval", "client|setname"} <= sent or STEPS < 100


# -- the checker itself ----------------------------------------------------------------------

def test_plan_is_reproducible_and_stays_in_its_namespace(docs):
    planner = Planner(docs)
    first, again = (randomclients.plan(planner, 3, 42, 300) for _ in range(2))
    assert [s.commands for s in first] == [s.commands for s in again]
    assert [s.commands for s in randomclients.plan(planner, 4, 42, 300)] != [s.commands for s in first]
    for step in first:
        assert all(key.startswith(b"{rg03}:") for key in step.keys), step.label
        for command in step.commands:
            assert command[0].lower().decode() not in {"flushall", "shutdown", "monitor", "quit"}, step.label


@pytest.mark.parametrize("payload,values", [
    (b"+OK\r\n", [(b"+", b"OK")]),
    (b"$-1\r\n_\r\n", [(b"$", None), (b"_", b"")]),
    (b"*2\r\n$1\r\na\r\n:1\r\n", [(b"*", ((b"$", b"a"), (b":", b"1")))]),
    (b"%1\r\n+k\r\n,1.5\r\n", [(b"%", ((b"+", b"k"), (b",", b"1.5")))]),
    (b">2\r\n$4\r\npong\r\n$1\r\nx\r\n", [(b">", ((b"$", b"pong"), (b"$", b"x")))]),
    (b"|1\r\n+a\r\n:1\r\n#t\r\n", [(b"|", (((b"+", b"a"), (b":", b"1")), (b"#", b"t")))]),
])
def test_parse(payload, values):
    found, pos = [], 0
    while pos < len(payload):
        value, pos = randomclients.parse(payload, pos)
        found.append(value)
    assert found == values
    cut, pos = payload[:-1], 0
    with pytest.raises(randomclients.Incomplete):
        while True:
            _, pos = randomclients.parse(cut, pos)


def test_compare_finds_a_changed_reply_and_follows_taints():
    keys = {b"{rg00}:s"}
    plans = [[Step([[b"SPOP", b"{rg00}:s"]], ["spop"], keys, NONE, taints=True),
              Step([[b"SMEMBERS", b"{rg00}:s"]], ["smembers"], keys, BYTES),
              Step([[b"GET", b"{rg00}:a"]], ["get"], {b"{rg00}:a"}, BYTES)]]
    same = Outcome([[(b"$1\r\na\r\n", None)], [(b"*0\r\n", None)], [(b"$1\r\nv\r\n", None)]])
    other = Outcome([[(b"$1\r\nb\r\n", None)], [(b"*1\r\n$1\r\na\r\n", None)], [(b"$1\r\nw\r\n", None)]])
    problems = randomclients.compare(plans, [other], [same])
    assert len(problems) == 1 and "GET {rg00}:a" in problems[0]  # SMEMBERS of a tainted key: not compared


def test_compare_leaves_out_where_an_invalidation_falls():
    """CLIENT TRACKING's BCAST invalidations leave at the end of Redis's event loop: their place
    among the replies is not compared; a reply, or another push, in a different place is."""
    keys = {b"{rg00}:a"}
    plans = [[Step([[b"GET", b"{rg00}:a"]], ["get"], keys, BYTES), Step([[b"PING"]], ["ping"], set(), BYTES)]]
    push = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$8\r\n{rg00}:a\r\n"
    message = b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n"
    for other_push, differ in ((push, 0), (message, 2)):
        value = randomclients.parse(other_push, 0)[0]
        early = Outcome([[(b"_\r\n", None), (other_push, value)], [(b"+PONG\r\n", None)]])
        late = Outcome([[(b"_\r\n", None)], [(other_push, value), (b"+PONG\r\n", None)]])
        assert len(randomclients.compare(plans, [early], [late])) == differ


def test_checker_catches_a_reply_of_another_client():
    """A server that answers one client's marker with another client's must fail the run."""

    async def main():
        async def crossed(reader, writer):
            while data := await reader.read(65536):
                writer.write(b"+OK\r\n$9\r\nrgmk:01:0\r\n" if b"rgmk:00" in data else b"+OK\r\n")
                await writer.drain()

        server = await asyncio.start_server(crossed, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        step = Step([[b"GET", b"{rg00}:a"]], ["get"], set(), BYTES)
        try:
            await randomclients.run_client(port, 0, [step], 2, random.Random(1), read_timeout=2)
        finally:
            server.close()

    with pytest.raises(randomclients.IsolationError, match="not its next one"):
        asyncio.run(main())
