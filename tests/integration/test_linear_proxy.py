"""One client cannot freeze the others with a big request or a stream of refusals (issue 49):
a 100,000-bad-key MGET leaves another client's PING answered promptly, 20,000 refused SETs are
logged in a few lines whose counts add up and are counted exactly, and SIGTERM stops the proxy
while a 1,000,000-key MGET is decided."""

import json
import os
import signal
import socket
import threading
import time
import urllib.request

import hiredis
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import PASSTHROUGH, REPO, ProxyProcess, RedisServer, free_port

STRICT = os.path.join(REPO, "configs", "policies", "strict-dotted.yaml")


@pytest.fixture
def server():
    redis_server = RedisServer()
    yield redis_server
    redis_server.close()


def findings(metrics_port: int) -> dict:
    """rule -> redis_guard_policy_findings_total of its rejections."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    out = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == "redis_guard_policy_findings_total" and sample.labels["outcome"] == "rejected":
                out[sample.labels["rule"]] = out.get(sample.labels["rule"], 0) + sample.value
    return out


def read_replies(conn: socket.socket, count: int, timeout: float) -> list:
    reader = hiredis.Reader()
    replies = []
    deadline = time.monotonic() + timeout
    while len(replies) < count:
        assert time.monotonic() < deadline, f"{len(replies)} of {count} replies"
        chunk = conn.recv(1 << 20)
        assert chunk, "the proxy closed the connection"
        reader.feed(chunk)
        while (reply := reader.gets()) is not False:
            replies.append(reply)
    return replies


def mget(keys: int) -> bytes:
    return hiredis.pack_command((b"MGET", *(b"Bad Key %d" % i for i in range(keys))))


def test_a_ping_is_answered_while_another_client_sends_a_100000_bad_key_mget(server):
    proxy = ProxyProcess(server.url, PASSTHROUGH, "--policy", STRICT)
    big = socket.create_connection(("127.0.0.1", proxy.port), timeout=60)
    small = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
    try:
        sent = threading.Thread(target=big.sendall, args=(mget(100_000),), daemon=True)
        started = time.monotonic()
        sent.start()
        latencies = []
        answer = []
        waiting = threading.Thread(target=lambda: answer.extend(read_replies(big, 1, 60)), daemon=True)
        waiting.start()
        while waiting.is_alive() and time.monotonic() - started < 60:
            before = time.monotonic()
            small.sendall(b"PING\r\n")
            assert read_replies(small, 1, 30) == [b"PONG"]
            latencies.append(time.monotonic() - before)
            time.sleep(0.01)
        waiting.join(1)
        assert answer and isinstance(answer[0], hiredis.ReplyError) and "rule K1" in str(answer[0]), answer
        assert latencies and max(latencies) < 3.0, (max(latencies), len(latencies))  # quadratic: minutes
    finally:
        big.close()
        small.close()
        assert proxy.stop() == 0


def test_20000_refusals_make_a_few_log_lines_whose_counts_add_up_and_exact_metrics(server):
    metrics_port = free_port()
    proxy = ProxyProcess(server.url, PASSTHROUGH, "--policy", STRICT, "--metrics", str(metrics_port))
    n = 20_000
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as conn:
            conn.sendall(hiredis.pack_command(("SET", "BAD", "v")) * n)
            replies = read_replies(conn, n, 60)
        assert all(isinstance(reply, hiredis.ReplyError) for reply in replies)
        counted = findings(metrics_port)
    finally:
        assert proxy.stop() == 0  # (the last interval's lines are written on the way out)
    rules = {rule for rule, value in counted.items() if value}
    assert rules and "T1" in rules and all(counted[rule] == n for rule in rules), counted
    lines = [json.loads(line.split(": ", 1)[1]) for line in proxy.lines if '"event": "policy"' in line]
    assert len(lines) <= 2 * len(rules), lines  # the first of each rule at once, the others in one line
    for rule in rules:
        mine = [line for line in lines if line["rule"] == rule]
        assert sum(line["count"] for line in mine) == n, mine
        assert all(line["subject"] == "key 'BAD'" and line["command"] == "SET" for line in mine)


def test_sigterm_stops_the_proxy_while_a_million_key_mget_is_decided(server, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"policy: {STRICT}\nshutdown_timeout: 5\n")
    proxy = ProxyProcess(server.url, str(config))
    conn = socket.create_connection(("127.0.0.1", proxy.port), timeout=60)
    try:
        data = mget(1_000_000)
        conn.sendall(data[:-1])  # the request all but whole: the proxy reads it as it comes
        time.sleep(0.5)
        conn.sendall(data[-1:])  # ...and decides it now
        time.sleep(0.2)
        stopped = time.monotonic()
        proxy.process.send_signal(signal.SIGTERM)
        proxy.process.wait(5 + 10)  # shutdown_timeout, and the decision of a million keys
        assert time.monotonic() - stopped < 15
        assert proxy.process.returncode == 0
    finally:
        conn.close()
        proxy.stop()
