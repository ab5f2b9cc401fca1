"""The policy on live traffic: rejections in order, transactions, audit mode, reload, metrics."""

import json
import signal
import time
import urllib.request

import hiredis
import pytest
import redis

from proxy import errors
from proxy.policy.rules.t1_ttl import InjectTtl
from tests.servers import ProxyProcess, RedisServer, exchange, free_port

POLICY = """
name: {name}
mode: {mode}
rules:
  C1: {{}}
  K2: {{style: lowercase}}
"""


def start_with(server, folder, config: str, **files: str):
    """The proxy in front of `server` with `files` written into `folder` and the config `config`
    (relative paths name those files) plus a metrics endpoint: (process, metrics port)."""
    for name, text in files.items():
        (folder / name).write_text(text)
    metrics_port = free_port()
    (folder / "config.yaml").write_text(f"{config}metrics: 127.0.0.1:{metrics_port}\n")
    return ProxyProcess(server.url, str(folder / "config.yaml")), metrics_port


@pytest.fixture
def setup(tmp_path):
    server = RedisServer()
    process, metrics_port = start_with(server, tmp_path, "policy: policy.yaml\n",
                                       **{"policy.yaml": POLICY.format(name="first", mode="enforce")})
    yield server, process, tmp_path / "policy.yaml", metrics_port
    process.stop()
    server.close()


def test_rejection_names_the_rule_and_how_to_comply(setup):
    server, process, _, _ = setup
    client = redis.Redis(port=process.port)
    with pytest.raises(redis.exceptions.NoPermissionError) as err:
        client.set("UserProfile:1", "v")
    assert str(err.value) == "key 'UserProfile:1' breaks rule K2 (lowercase): use 'userprofile:1'"
    assert redis.Redis(port=server.port).exists("UserProfile:1") == 0
    with pytest.raises(redis.exceptions.NoPermissionError, match="rule C1 .*SCAN"):
        client.keys("*")


def test_rejected_commands_keep_pipeline_order(setup):
    _, process, _, _ = setup
    payload = (b"SET ok:1 a\r\nSET Bad:1 b\r\nGET ok:1\r\nKEYS *\r\nINCR ok:n\r\n")
    reply, closed = exchange(process.port, payload)
    assert reply == (b"+OK\r\n"
                     b"-NOPERM key 'Bad:1' breaks rule K2 (lowercase): use 'bad:1'\r\n"
                     b"$1\r\na\r\n"
                     b"-NOPERM command KEYS breaks rule C1 (no KEYS): use SCAN 0 MATCH <pattern> COUNT 100, "
                     b"repeated until the cursor is 0\r\n"
                     b":1\r\n")
    assert not closed


def test_a_thousand_pipelined_commands_good_and_refused_get_every_reply_in_order(setup):
    """Runs of refusals (answered by the proxy at once, collected in one write) among forwarded
    commands (answered by Redis): each reply in its command's place, checked one by one."""
    _, process, _, _ = setup
    commands, expected = [], []
    for i in range(1000):
        if (i // 7) % 3 == 0 or i % 5 == 0:  # runs of refusals, and single ones between good commands
            commands.append(b"SET Bad:%d v\r\n" % i)
            expected.append(b"-NOPERM key 'Bad:%d' breaks rule K2 (lowercase): use 'bad:%d'\r\n" % (i, i))
        elif i % 2:
            commands.append(b"SET ok:%d v%d\r\n" % (i, i))
            expected.append(b"+OK\r\n")
        else:
            commands.append(b"INCR ok:n\r\n")
            expected.append(None)  # the counter's value: counted below
    reply, closed = exchange(process.port, b"".join(commands), timeout=10)
    assert not closed
    reader = hiredis.Reader()
    reader.feed(reply)
    n = 0
    for i, want in enumerate(expected):
        got = reader.gets()
        assert got is not False, f"reply {i} missing"
        if want is None:
            n += 1
            assert got == n, f"reply {i}: {got!r}"
        elif want.startswith(b"-"):
            assert isinstance(got, hiredis.ReplyError) and str(got).encode() + b"\r\n" == want[1:], f"reply {i}"
        else:
            assert got == b"OK", f"reply {i}: {got!r}"
    assert reader.gets() is False
    assert reply.count(b"-NOPERM") == sum(1 for want in expected if want and want.startswith(b"-"))


KEYS_REFUSED = (b"-NOPERM command KEYS breaks rule C1 (no KEYS): use SCAN 0 MATCH <pattern> COUNT 100, "
                b"repeated until the cursor is 0\r\n")
SUBSCRIBED = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
STREAM_CASES = [
    # (name, requests, replies after HELLO's when the request starts with HELLO 3, closed)
    ("refusal after a subscription", b"SUBSCRIBE ch\r\nKEYS *\r\nPING\r\n",
     SUBSCRIBED + KEYS_REFUSED + b"*2\r\n$4\r\npong\r\n$0\r\n\r\n", False),
    ("refusals on a resp3 subscription", b"HELLO 3\r\nSUBSCRIBE ch\r\nGET Bad:1\r\nGET ok:none\r\nKEYS *\r\nPING\r\n",
     b">" + SUBSCRIBED[1:] + b"-NOPERM key 'Bad:1' breaks rule K2 (lowercase): use 'bad:1'\r\n_\r\n"
     + KEYS_REFUSED + b"+PONG\r\n", False),
    ("refusal with replies off", b"CLIENT REPLY OFF\r\nKEYS *\r\nSET ok:off 1\r\nCLIENT REPLY ON\r\nGET ok:off\r\n",
     b"+OK\r\n$1\r\n1\r\n", False),
    ("refusal skipped", b"CLIENT REPLY SKIP\r\nKEYS *\r\nKEYS *\r\n", KEYS_REFUSED, False),
    ("quit after a subscription", b"SUBSCRIBE ch\r\nKEYS *\r\nQUIT\r\n", SUBSCRIBED + KEYS_REFUSED + b"+OK\r\n", True),
]


@pytest.mark.parametrize("name,payload,expected,closed", STREAM_CASES, ids=[case[0] for case in STREAM_CASES])
def test_rejections_keep_their_place_on_a_stream(setup, name, payload, expected, closed):
    """Once replies are no longer paired (pub/sub, CLIENT REPLY), a refusal still comes after
    the replies to what the client sent before it, and not at all where Redis would not reply."""
    _, process, _, _ = setup
    reply, was_closed = exchange(process.port, payload)
    if payload.startswith(b"HELLO 3"):
        reply = reply[reply.index(b"*0\r\n") + 4:]  # after HELLO's map (it ends with modules: *0)
    assert (reply, was_closed) == (expected, closed)


def test_refusals_nobody_will_read_count_against_the_output_limit(tmp_path):
    """Under CLIENT REPLY OFF the server answers no barrier: the refusals waiting behind them
    count as unread replies, and past client_output_buffer that client alone is disconnected."""
    server = RedisServer()
    process, _ = start_with(server, tmp_path, "policy: policy.yaml\nlimits: {client_output_buffer: 20000}\n",
                            **{"policy.yaml": POLICY.format(name="first", mode="enforce")})
    try:
        reply, closed = exchange(process.port, b"CLIENT REPLY OFF\r\n" + b"KEYS *\r\n" * 1000, settle=0.5)
        assert (reply, closed) == (b"", True)
        assert exchange(process.port, b"CLIENT REPLY OFF\r\n" + b"KEYS *\r\n" * 100 + b"CLIENT REPLY ON\r\nPING\r\n") == \
            (b"+OK\r\n+PONG\r\n", False)  # under the limit the client stays
        assert "disconnected" in process.log
    finally:
        process.stop()
        server.close()


def test_a_command_the_policy_completes_is_refused_on_a_stream(tmp_path):
    """T1 inject adds EXPIRE ... NX after a write that may create a key without a TTL. On a stream
    the proxy cannot send it unseen (its reply would reach the client, and a MULTI there may be
    open): the write is refused instead of reaching Redis without its TTL, as it did."""
    server = RedisServer()
    process, _ = start_with(server, tmp_path, "policy: policy.yaml\n",
                            **{"policy.yaml": "name: t\nrules:\n  T1: {action: inject, default_ttl: 600}\n"})
    try:
        # (a subscription run by EXEC streams: its push is in EXEC's reply, no reply is paired after it)
        reply, closed = exchange(process.port, b"HELLO 3\r\nMULTI\r\nSUBSCRIBE ch\r\nEXEC\r\n"
                                               b"HSET h:1 f v\r\nSET s:1 v\r\nPING\r\n")
        assert reply.endswith(b"*1\r\n>3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
                              + errors.needs_paired_replies([b"HSET"], [InjectTtl]) + b"+OK\r\n+PONG\r\n")
        direct = redis.Redis(port=server.port)
        assert direct.exists("h:1") == 0 and direct.ttl("s:1") == 600  # SET's TTL is in the command itself
        assert exchange(process.port, b"HSET h:2 f v\r\n") == (b":1\r\n", False) and direct.ttl("h:2") == 600
    finally:
        process.stop()
        server.close()


V1_COPY = b"-NOPERM key 'dst:%d' breaks rule V1 (string size): keep string values at most 4 bytes (it would hold 12)\r\n"
SCRIPT_STREAM_CASES = [
    # (requests, replies after HELLO's, refusals counted): COPY's size is checked by a script
    (b"CLIENT REPLY ON\r\nCOPY src:1 dst:1\r\nCOPY small:1 dst:9\r\nPING\r\n", b"+OK\r\n" + V1_COPY % 1 + b":1\r\n+PONG\r\n", 1),
    (b"HELLO 3\r\nSUBSCRIBE ch\r\nCOPY src:1 dst:2\r\nPING\r\n", b">" + SUBSCRIBED[1:] + V1_COPY % 2 + b"+PONG\r\n", 1),
    (b"CLIENT REPLY SKIP\r\nCOPY src:1 dst:3\r\nPING\r\n", b"+PONG\r\n", 0),
    (b"CLIENT REPLY ON\r\nCLIENT REPLY SKIP\r\nCOPY src:1 dst:4\r\nPING\r\n", b"+OK\r\n+PONG\r\n", 0),
    (b"CLIENT REPLY OFF\r\nCOPY src:1 dst:5\r\nCLIENT REPLY ON\r\nPING\r\n", b"+OK\r\n+PONG\r\n", 0),
]


def test_a_scripts_refusal_on_a_stream_is_counted(tmp_path):
    """The policy's server-side check (here V1 on COPY, which only the server can size) refuses
    by the script's own NOPERM. On a stream that reply is watched between two barriers, so it is
    counted and logged like any refusal (it was neither). Where the server may leave commands
    unanswered (CLIENT REPLY OFF or SKIP sent) nothing is put around the script: it takes the
    skip, as the client's command would have."""
    server = RedisServer()
    process, metrics_port = start_with(server, tmp_path, "policy: policy.yaml\n",
                                       **{"policy.yaml": "name: v1\nrules:\n  V1: {max_bytes: 4}\n"})
    direct = redis.Redis(port=server.port)
    direct.set("src:1", "toolongvalue")
    direct.set("small:1", "v")
    try:
        for payload, expected, _ in SCRIPT_STREAM_CASES:
            reply, closed = exchange(process.port, payload)
            if payload.startswith(b"HELLO 3"):
                reply = reply[reply.index(b"*0\r\n") + 4:]
            assert (reply, closed) == (expected, False), payload
        assert [direct.exists(f"dst:{n}") for n in range(1, 6)] == [0] * 5 and direct.get("dst:9") == b"v"
        body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
        counted = sum(case[2] for case in SCRIPT_STREAM_CASES)
        assert f'outcome="rejected",policy="v1",rule="V1"}} {counted}.0' in body
        process.stop()  # (the last interval's findings are logged on the way out)
        lines = [json.loads(line.split(": ", 1)[1]) for line in process.lines
                 if '"rule": "V1"' in line and '"outcome": "rejected"' in line]
        assert sum(line["count"] for line in lines) == counted
    finally:
        process.stop()
        server.close()


def test_rejected_command_inside_multi_aborts_exec(setup):
    server, process, _, _ = setup
    payload = b"MULTI\r\nSET tx:a 1\r\nSET TX:B 2\r\nEXEC\r\nGET tx:a\r\n"
    reply, _ = exchange(process.port, payload)
    assert reply == (b"+OK\r\n+QUEUED\r\n"
                     b"-NOPERM key 'TX:B' breaks rule K2 (lowercase): use 'tx:b'\r\n"
                     b"-EXECABORT Transaction discarded because of previous errors.\r\n"
                     b"$-1\r\n")
    assert redis.Redis(port=server.port).exists("tx:a") == 0
    # A clean transaction still runs.
    reply, _ = exchange(process.port, b"MULTI\r\nSET tx:a 1\r\nEXEC\r\n")
    assert reply == b"+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n"


def test_destination_keys_are_checked(setup):
    server, process, _, _ = setup
    client = redis.Redis(port=process.port)
    client.set("src:1", "v")
    for call in (lambda: client.rename("src:1", "Dst:1"), lambda: client.copy("src:1", "Dst:2"),
                 lambda: client.sort("src:list", store="Dst:3")):
        with pytest.raises(redis.exceptions.NoPermissionError, match="rule K2"):
            call()
    assert redis.Redis(port=server.port).get("src:1") == b"v"


def test_reload_on_change_and_sighup_keeps_running_policy_when_invalid(setup):
    _, process, policy, _ = setup
    client = redis.Redis(port=process.port)
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.set("Mixed:1", "v")
    # An invalid file is refused; the running policy stays.
    policy.write_text("name: broken\nrules:\n  K2: {style: weird}\n")
    process.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "refused" not in process.log and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "policy.yaml:3" in process.log
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.set("Mixed:1", "v")
    # A valid change applies to the next command of the same connection, without a signal.
    policy.write_text(POLICY.format(name="second", mode="audit"))
    deadline = time.monotonic() + 5
    while True:
        try:
            assert client.set("Mixed:1", "v") is True
            break
        except redis.exceptions.NoPermissionError:
            assert time.monotonic() < deadline, process.log
            time.sleep(0.1)
    assert "policy reloaded (file changed): 'second'" in process.log


def test_audit_mode_allows_logs_and_counts(setup):
    _, process, policy, metrics_port = setup
    policy.write_text(POLICY.format(name="dry-run", mode="audit"))
    process.process.send_signal(signal.SIGHUP)
    client = redis.Redis(port=process.port)
    deadline = time.monotonic() + 5
    while "'dry-run'" not in process.log and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.set("AuditMe:1", "v") is True
    deadline = time.monotonic() + 5
    while '"outcome": "audited"' not in process.log and time.monotonic() < deadline:
        time.sleep(0.05)
    line = next(line for line in process.lines if '"outcome": "audited"' in line)
    assert '"rule": "K2"' in line and "AuditMe:1" in line and '"v"' not in line
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    assert 'redis_guard_policy_findings_total{app="",mode="audit",outcome="audited",policy="dry-run",rule="K2"} 1.0' in body


def test_audit_mode_counts_the_rewrite_it_does_not_do(setup):
    server, process, policy, metrics_port = setup
    policy.write_text("name: dry-del\nmode: audit\nrules:\n  C4: {}\n")
    process.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "'dry-del'" not in process.log and time.monotonic() < deadline:
        time.sleep(0.05)
    client = redis.Redis(port=process.port)
    direct = redis.Redis(port=server.port)
    client.set("big:1", "v")
    before = direct.info("commandstats")
    assert client.delete("big:1") == 1
    after = direct.info("commandstats")
    assert after["cmdstat_del"]["calls"] == before.get("cmdstat_del", {}).get("calls", 0) + 1  # sent as DEL
    assert after.get("cmdstat_unlink") == before.get("cmdstat_unlink")
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    assert ('redis_guard_policy_findings_total{app="",mode="audit",outcome="audited",policy="dry-del",rule="C4"} 1.0'
            in body)


MEMO_POLICY = """
name: memo
rules:
  K2: {style: lowercase}
  T1: {action: reject}
  V1: {max_bytes: 4}
"""


def test_a_remembered_pass_decides_nothing_for_other_commands(tmp_path):
    """The engine's memo of passes (same key, same shape) through a running proxy: what passed
    once passes again, anything that differs in a way the rules read is decided again."""
    server = RedisServer()
    policy = tmp_path / "memo.yaml"
    policy.write_text(MEMO_POLICY)
    process = ProxyProcess(server.url, "configs/passthrough.yaml", "--policy", str(policy))
    try:
        t1 = (b"-NOPERM key 'memo:1' breaks rule T1 (every key has a TTL): add EX <seconds> (or PX, "
              b"EXAT, PXAT), or send EXPIRE memo:1 <seconds> after it in the same pipeline or transaction\r\n")
        exchanges = [
            (b"SET memo:1 abc EX 60\r\nSET memo:1 xyz EX 60\r\n", b"+OK\r\n+OK\r\n"),  # then remembered
            (b"SET memo:1 abcde EX 60\r\n",  # longer than V1's 4 bytes
             b"-NOPERM key 'memo:1' breaks rule V1 (string size): keep string values at most 4 bytes "
             b"(got 5 bytes)\r\n"),
            (b"SET memo:1 abc\r\n", t1),  # no TTL
            (b"SET memo:1 abc\r\nEXPIRE memo:1 60\r\n", b"+OK\r\n:1\r\n"),  # a TTL later in the pipeline
            (b"SET memo:1 abc\r\n", t1),  # ... was not remembered
            (b"MULTI\r\nSET memo:1 abc\r\nEXPIRE memo:1 60\r\nEXEC\r\n",  # a TTL in the transaction
             b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:1\r\n"),
            (b"SET memo:1 abc\r\n", t1),  # ... was not remembered either
            # Keys of one class (keyclass: here every byte but A-Z is alike) share what passed...
            (b"SET memo:2 abc EX 60\r\nGET memo:3\r\n", b"+OK\r\n$-1\r\n"),
            # ... and a key of the same length in another class is decided in full.
            (b"SET Memo:2 abc EX 60\r\n", b"-NOPERM key 'Memo:2' breaks rule K2 (lowercase): use 'memo:2'\r\n"),
            (b"GET meMo:3\r\n", b"-NOPERM key 'meMo:3' breaks rule K2 (lowercase): use 'memo:3'\r\n"),
        ]
        for payload, expected in exchanges:
            reply, closed = exchange(process.port, payload)
            assert (payload, reply) == (payload, expected)
            assert not closed
        assert redis.Redis(port=server.port).get("memo:1") == b"abc"
        assert sorted(redis.Redis(port=server.port).keys("*emo*")) == [b"memo:1", b"memo:2"]
    finally:
        process.stop()
        server.close()
