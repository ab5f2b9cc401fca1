"""`redis_guard_commands_total` counts every command a client sent exactly once, whatever the
dispatch loop did with it: passed on as it is (counted by its dispatch-table Tally), handled by
the proxy, refused or rewritten by the policy, or dispatched again after a wait (transactions,
blocking commands, SELECT, a lent connection). Random pipelines over a real proxy and server,
compared with what was sent."""

import collections
import os
import random

import hiredis

from tests.monitor.test_endpoints import redis_server, scrape  # noqa: F401 - fixture
from tests.servers import PASSTHROUGH, ProxyProcess, exchange_batches, free_port

POLICY = "name: counted\nrules:\n  K2: {style: lowercase}\n  T1: {action: inject, default_ttl: 60}\n"

# Every kind of path through the dispatch loop, with keys the policy takes and ones it refuses.
COMMANDS = [
    ("GET", "user:1"), ("get", "user:2"), ("Get", "user:3"),  # passed on; three spellings
    ("SET", "user:1", "v"),  # T1 rewrites it: EXPIRE added
    ("SET", "user:2", "v", "EX", "60"),  # passed on
    ("SET", "BadKey", "v"),  # K2 refuses it
    ("INCR", "count:1"),
    ("MULTI",), ("EXEC",), ("DISCARD",),  # transactions (and their errors out of one)
    ("WATCH", "user:1"), ("UNWATCH",),
    ("SELECT", "0"), ("SELECT", "1"), ("HELLO", "3"), ("HELLO", "2"),  # wait for their reply, then go on
    ("BLPOP", "queue:1", "0.01"),  # a lent connection, after what is in flight
    ("CLIENT", "SETNAME", "counted"), ("CLIENT", "GETNAME"), ("CLIENT", "ID"),
    ("PING",), ("ECHO", "x"),
    ("NOSUCHCOMMAND", "a"),  # outside the command table
    ("CONFIG", "GET", "maxmemory"),
]


def test_every_command_sent_is_counted_once(redis_server, tmp_path):  # noqa: F811
    # (drawn here, not as a parameter: test ids must be the same in every process of a run)
    seed = int(os.environ.get("RG_COUNTS_SEED", 0)) or random.randrange(1 << 30)
    draw = random.Random(seed)
    metrics = free_port()
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    proxy = ProxyProcess(redis_server.url, PASSTHROUGH, "--metrics", str(metrics), "--policy", str(policy))
    sent = collections.Counter()
    try:
        for _connection in range(6):
            batches = []
            for _ in range(draw.randrange(1, 6)):
                commands = [draw.choice(COMMANDS) for _ in range(draw.randrange(1, 12))]
                sent.update(cmd[0].lower() for cmd in commands)
                batches.append(b"".join(hiredis.pack_command(cmd) for cmd in commands))
            exchange_batches(proxy.port, batches, settle=0.15)
        samples = scrape(metrics)
    finally:
        assert proxy.stop() == 0
    counted = collections.Counter()
    for (name, labels), value in samples.items():
        if name == "redis_guard_commands_total":
            counted[dict(labels)["command"]] += int(value)
    expected = collections.Counter({("unknown" if name == "nosuchcommand" else name): n for name, n in sent.items()})
    assert counted == expected, f"seed {seed} (replay with RG_COUNTS_SEED={seed})"
