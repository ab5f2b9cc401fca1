"""The monitoring endpoints of a running proxy (`python -m proxy serve --metrics ...`): counts after
known traffic with one worker and with two, /ready across an upstream stop and start and during
the shutdown drain, JSON logs line by line, audit findings rate-limited, the CLI's flags."""

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import hiredis
import pytest

from proxy.monitor import exporter
from tests.servers import (
    BUSY_SCRIPT,
    PASSTHROUGH,
    REPO,
    ProxyProcess,
    RedisServer,
    exchange,
    free_port,
    parse_all,
    scrape,
    wait_for,
)
from tests.servers import (
    http_get as get,
)

AUDIT_POLICY = "name: audited\nmode: audit\nrules:\n  K2: {style: lowercase}\n"


@pytest.fixture
def redis_server():
    server = RedisServer()
    yield server
    server.close()






def send(port: int, commands: list[tuple], connections: int = 1, per_write: int = 0) -> list:
    """Send the commands over new connections (split evenly), pipelined `per_write` at a time
    (0: all at once), each write after the replies to the one before; every reply, in order."""
    replies = []
    share = -(-len(commands) // connections)
    for start in range(0, len(commands), share):
        part = commands[start:start + share]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            step = per_write or len(part)
            for at in range(0, len(part), step):
                conn.sendall(b"".join(hiredis.pack_command(cmd) for cmd in part[at:at + step]))
                data = b""
                while len(parse_all(data)) < len(part[at:at + step]):
                    chunk = conn.recv(65536)
                    assert chunk, "the proxy closed the connection"
                    data += chunk
                replies += parse_all(data)
    return replies


def command_count(samples: dict, command: str, result: str) -> float:
    return samples.get(("redis_guard_commands_total", (("command", command), ("result", result))), 0)


@pytest.mark.parametrize("workers", [1, 2])
def test_metrics_count_known_traffic(redis_server, tmp_path, workers):
    metrics = free_port()
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: counted\nrules:\n  K2: {style: lowercase}\n")
    proxy = ProxyProcess(redis_server.url, PASSTHROUGH, "--metrics", str(metrics), "--workers", str(workers),
                         "--policy", str(policy))
    try:
        sets = [("SET", f"k:{i}", "v" * (i % 7)) for i in range(300)]
        gets = [("get", f"k:{i}") for i in range(200)]
        wrong = [("LPUSH", "k:1", "x")] * 7  # WRONGTYPE: k:1 holds a string
        unknown = [("NOSUCHCOMMAND", "a")] * 3
        refused = [("SET", "BadKey", "v")] * 4  # K2
        commands = sets + gets + wrong + unknown + refused
        forwarded = sum(len(hiredis.pack_command(cmd)) for cmd in commands if cmd not in refused)
        # Runs of a few commands: one run in TIME_EVERY is timed, so there are enough of them.
        replies = (send(proxy.port, sets, connections=6, per_write=3) + send(proxy.port, gets, 4, per_write=2)
                   + send(proxy.port, wrong + unknown + refused, connections=2))
        assert sum(isinstance(reply, hiredis.ReplyError) for reply in replies) == 14
        held = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(3)]
        time.sleep(0.3)
        samples = scrape(metrics)
        for conn in held:
            conn.close()
    finally:
        assert proxy.stop() == 0
    assert samples[("redis_guard_workers", ())] == workers
    assert command_count(samples, "set", "ok") == 300
    assert command_count(samples, "set", "rejected") == 4
    assert command_count(samples, "get", "ok") == 200
    assert command_count(samples, "lpush", "error") == 7
    assert command_count(samples, "unknown", "error") == 3
    assert sum(value for (name, labels), value in samples.items() if name == "redis_guard_commands_total") == 514
    # The timed sample is scaled to the commands answered.
    assert samples[("redis_guard_command_duration_seconds_count", (("command", "set"),))] == 300
    assert samples[("redis_guard_command_duration_seconds_count", (("command", "get"),))] == 200
    assert samples[("redis_guard_command_duration_seconds_bucket", (("command", "get"), ("le", "+Inf")))] == 200
    assert samples[("redis_guard_request_bytes_total", ())] == forwarded  # written upstream: not the refused
    assert samples[("redis_guard_reply_bytes_total", ())] >= 300 * 5 + 200 * 4
    assert samples[("redis_guard_client_connections", ())] == 3
    assert samples[("redis_guard_upstream_connections", (("kind", "shared"),))] >= 1
    assert samples[("redis_guard_upstream_up", (("upstream", f"127.0.0.1:{redis_server.port}"),))] == 1
    assert samples[("redis_guard_policy_info", (("mode", "enforce"), ("policy", "counted"), ("sha", (
        __import__("hashlib").sha256(policy.read_bytes()).hexdigest()[:12]))))] == 1
    assert samples[("redis_guard_policy_last_reload_timestamp_seconds", ())] > time.time() - 120
    finding = (("app", ""), ("mode", "enforce"), ("outcome", "rejected"), ("policy", "counted"), ("rule", "K2"))
    assert samples[("redis_guard_policy_findings_total", finding)] == 4
    assert samples[("redis_guard_clients", ())] == 3  # the gauge that existed before, summed too
    for name in exporter.EXPORTED:
        assert any(sample == name or sample.startswith(name + "_") for sample, _ in samples) or name in (
            "redis_guard_slow_commands_total", "redis_guard_policy_info"), name


def test_ready_follows_the_upstream_and_down_and_up_are_logged_once(redis_server):
    metrics = free_port()
    proxy = ProxyProcess(redis_server.url, PASSTHROUGH, "--metrics", f"127.0.0.1:{metrics}")
    try:
        assert get(metrics, "/ready") == (200, "ready\n")
        assert get(metrics, "/healthz") == (200, "ok\n")
        assert get(metrics, "/")[0] == 404 and get(metrics, "/metricsx")[0] == 404
        assert send(proxy.port, [("SET", "k", "v")]) == [b"OK"]  # a shared connection is open
        redis_server.stop()
        wait_for(lambda: get(metrics, "/ready")[0] == 503, 5, "/ready to say 503")
        assert "upstream unreachable" in get(metrics, "/ready")[1]
        for _ in range(3):  # the client's connection closes, as from a Redis that went away
            reply, closed = exchange(proxy.port, hiredis.pack_command(("GET", "k")))
            assert reply == b"" and closed
        assert get(metrics, "/healthz")[0] == 200
        redis_server.start()
        wait_for(lambda: get(metrics, "/ready")[0] == 200, 5, "/ready to say 200")
        wait_for(lambda: send(proxy.port, [("GET", "k")]) == [None], 5, "the proxy to reconnect")
        samples = scrape(metrics)
    finally:
        proxy.stop()
    down = [line for line in proxy.lines if " is down: " in line]
    up = [line for line in proxy.lines if " is back up after " in line]
    assert len(down) == 1 and len(up) == 1, proxy.log
    assert "3 requests failed while it was down" in up[0] or "4 requests failed" in up[0], up[0]
    label = (("upstream", f"127.0.0.1:{redis_server.port}"),)
    assert samples[("redis_guard_upstream_up", label)] == 1
    assert samples[("redis_guard_upstream_failed_requests_total", label)] >= 3


def draining(metrics: int):
    answer = get(metrics, "/ready")
    return answer if answer[0] == 503 and "draining" in answer[1] else None


def test_ready_says_503_while_draining(redis_server):
    metrics = free_port()
    proxy = ProxyProcess(redis_server.url, PASSTHROUGH, "--metrics", str(metrics))
    conn = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    try:
        # a script busy for 3 s keeps the drain going (a command that waits, BLPOP, is not waited for)
        assert get(metrics, "/ready")[0] == 200
        conn.sendall(hiredis.pack_command(("EVAL", BUSY_SCRIPT, "0", "3000")))
        time.sleep(0.3)
        proxy.process.send_signal(signal.SIGTERM)
        _, body = wait_for(lambda: draining(metrics), 2.5, "/ready to say 503")
        assert "draining" in body and proxy.process.poll() is None
        assert conn.recv(100) == b":1\r\n"  # the request in flight was answered before the exit
        # The drain ends by itself: stop()'s own SIGTERM would cut a slow one short (exit -15).
        assert proxy.process.wait(30) == 0
    finally:
        conn.close()
        proxy.stop()


def test_json_logs_parse_line_by_line_and_findings_are_gathered(redis_server, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(AUDIT_POLICY)
    proxy = ProxyProcess(redis_server.url, PASSTHROUGH, "--policy", str(policy), "--log-format", "json")
    try:
        findings = 2000
        send(proxy.port, [("SET", f"Bad:{i}", "v") for i in range(findings)])
    finally:
        assert proxy.stop() == 0
    lines = [json.loads(line) for line in proxy.lines]
    assert all({"time", "level", "logger", "pid", "message"} <= set(line) for line in lines)
    ready = [line for line in lines if line.get("event") == "ready"]
    assert len(ready) == 1 and ready[0]["workers"] == 1 and ready[0]["policy"] == "audited"
    logged = [line for line in lines if line.get("event") == "policy"]
    assert logged and all(line["rule"] == "K2" and line["outcome"] == "audited" for line in logged)
    # The first at once, the others in one line with their count (written at the interval's end or on exit).
    assert len(logged) == 2 and [line["count"] for line in logged] == [1, findings - 1], logged


@pytest.mark.parametrize("args, code, expected", [
    (["--version"], 0, "redis-guard 0.1.0"),
    (["serve", "--log-level", "bogus"], 2, "invalid choice: 'BOGUS'"),
    (["--log-level", "bogus", "serve"], 2, "invalid choice: 'BOGUS'"),
    (["serve", "--log-format", "xml"], 2, "invalid choice: 'xml'"),
])
def test_cli_flags(args, code, expected):
    done = subprocess.run([sys.executable, "-m", "proxy", *args], cwd=REPO, capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == code
    assert expected in done.stdout + done.stderr


def test_log_level_is_taken_after_the_subcommand(redis_server):
    proxy = ProxyProcess(redis_server.url, PASSTHROUGH, "--log-level", "warning")
    try:
        assert send(proxy.port, [("PING",)]) == [b"PONG"]
    finally:
        proxy.stop()
    assert "ready: listening" in proxy.log  # the ready line is logged at INFO...
    assert not [line for line in proxy.lines if " INFO " in line and "ready" not in line]


def test_ready_line_has_a_timestamp_and_listen_port_alone_means_loopback(redis_server):
    port = free_port()
    args = [sys.executable, "-m", "proxy", "serve", "--config", PASSTHROUGH, "--listen", str(port),
            "--upstream", redis_server.url]
    process = subprocess.Popen(args, cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "ready" not in line:
            line = process.stderr.readline()
            assert line, "the proxy exited before its ready line"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(15)
    assert f"ready: listening on 127.0.0.1:{port}," in line
    time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")


@pytest.mark.parametrize("flag, message", [
    ("--metrics", "cannot serve metrics on 127.0.0.1:{port}"),
    ("--listen", "cannot listen on 127.0.0.1:{port}"),
])
def test_a_busy_address_is_named(redis_server, flag, message):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        args = [sys.executable, "-m", "proxy", "serve", "--config", PASSTHROUGH, "--upstream", redis_server.url,
                "--listen", "127.0.0.1:0", flag, f"127.0.0.1:{port}"]
        done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1
    assert message.format(port=port) in done.stderr, done.stderr


def test_redis_py_retry_recovers_across_an_upstream_restart(redis_server):
    import redis
    from redis.backoff import ConstantBackoff
    from redis.retry import Retry

    proxy = ProxyProcess(redis_server.url)
    restart = threading.Timer(0.5, redis_server.start)
    try:
        client = redis.Redis(port=proxy.port, retry=Retry(ConstantBackoff(0.2), 20), socket_timeout=5)
        client.set("retry:k", "v")
        redis_server.stop()
        restart.start()
        assert client.set("retry:k", "after") is True
    finally:
        restart.join()
        proxy.stop()
