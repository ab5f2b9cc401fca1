"""Remembered refusals through a real proxy (policy/refusals.py): SETs on many keys of a few
classes, pipelined and one at a time, are answered with exactly the texts a full decision gives,
counted exactly in the metrics and in the findings log's counts, and a later EXPIRE in the same
pipeline still counts as the rules say."""

import json
import random
import socket

import hiredis

from proxy import errors
from proxy.commands.table import CommandTable
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy
from tests.integration.test_linear_proxy import STRICT, findings, read_replies, server  # noqa: F401
from tests.servers import PASSTHROUGH, ProxyProcess, free_port


def expected_reply(engine: Engine, args: list[bytes]) -> bytes:
    verdict = engine.decide(engine.plan_for(args), args, (), SessionState())
    return errors.policy_violation(verdict.reject)


def test_remembered_refusals_answer_and_count_as_full_decisions(server):  # noqa: F811
    metrics_port = free_port()
    proxy = ProxyProcess(server.url, PASSTHROUGH, "--policy", STRICT, "--metrics", str(metrics_port))
    rng = random.Random(49)
    pipelined = [[b"SET", b"BadKey%d" % rng.randrange(100_000), b"xxx"] for _ in range(3000)]
    alone = [[b"SET", b"Bad.Key:%d:string" % rng.randrange(1000), b"xxx", b"EX", b"60"] for _ in range(100)]
    engine = Engine(load_policy(STRICT), CommandTable.from_snapshot())
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as conn:
            conn.sendall(b"".join(hiredis.pack_command(tuple(args)) for args in pipelined))
            replies = read_replies(conn, len(pipelined), 60)
            for args in alone:  # one at a time: the session's single-command path
                conn.sendall(hiredis.pack_command(tuple(args)))
                replies += read_replies(conn, 1, 30)
        counted = findings(metrics_port)
    finally:
        assert proxy.stop() == 0
    for args, reply in zip(pipelined + alone, replies):
        assert isinstance(reply, hiredis.ReplyError)
        assert b"-" + str(reply).encode() + b"\r\n" == expected_reply(engine, args), args
    assert counted == {"K1": 3000, "K2": 3100, "K3": 3100, "K6": 3000, "T1": 3000}, counted
    lines = [json.loads(line.split(": ", 1)[1]) for line in proxy.lines if '"event": "policy"' in line]
    keys = {args[1].decode() for args in pipelined + alone}
    for rule, count in counted.items():
        mine = [line for line in lines if line["rule"] == rule]
        assert sum(line["count"] for line in mine) == count, mine
        assert all(line["subject"][len("key '"):-1] in keys and line["command"] == "SET" for line in mine), mine
