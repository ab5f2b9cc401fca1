"""request_timeout's allowance for commands that block by design (proxy/upstream/deadline.py)."""

from __future__ import annotations

import hiredis
import pytest

from proxy.upstream.deadline import allowance, block_seconds


@pytest.mark.parametrize(("args", "seconds"), [
    ([b"GET", b"k"], 0.0),
    ([b"BLPOP", b"a", b"b", b"2"], 2.0),
    ([b"blpop", b"a", b"0"], None),
    ([b"BRPOP", b"a", b"0.5"], 0.5),
    ([b"BLMOVE", b"a", b"b", b"LEFT", b"RIGHT", b"3"], 3.0),
    ([b"BRPOPLPUSH", b"a", b"b", b"0"], None),
    ([b"BZPOPMIN", b"z", b"1.5"], 1.5),
    ([b"BLMPOP", b"4", b"1", b"a", b"LEFT"], 4.0),
    ([b"BZMPOP", b"0", b"1", b"z", b"MIN"], None),
    ([b"XREAD", b"COUNT", b"1", b"BLOCK", b"2500", b"STREAMS", b"s", b"$"], 2.5),
    ([b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"], None),
    ([b"XREAD", b"STREAMS", b"block", b"0"], 0.0),  # keys named like the option: not blocking
    ([b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK", b"1000", b"STREAMS", b"s", b">"], 1.0),
    ([b"WAIT", b"1", b"0"], None),
    ([b"WAIT", b"1", b"3000"], 3.0),
    ([b"WAITAOF", b"1", b"0", b"100"], 0.1),
    ([b"BLPOP", b"a", b"soon"], 0.0),  # Redis refuses it at once
    ([b"BLPOP", b"a", b"-1"], 0.0),
])
def test_block_seconds(args, seconds):
    assert block_seconds(args) == seconds


def run(*commands) -> bytes:
    return b"".join(hiredis.pack_command(command) for command in commands)


def test_allowance_counts_the_unanswered_requests_of_a_run():
    sent = run(("BLPOP", "a", "2"), ("GET", "k"), ("BLPOP", "b", "3"))
    assert allowance(sent, 3, 3) == 5.0
    assert allowance(sent, 3, 1) == 3.0  # the first two were answered
    assert allowance(run(("GET", "k"), ("BLPOP", "a", "0")), 2, 2) is None
    assert allowance(None, 0, 1) == 0.0  # the proxy's own start-up
    assert allowance(b"BLPOP a 0\r\n", 1, 1) is None  # inline


def test_allowance_of_plain_commands_is_nothing():
    assert allowance(run(("SET", "k", "v"), ("GET", "k")), 2, 2) == 0.0


@pytest.mark.parametrize(("text", "expected"), [
    ("", 10.0), ("upstream_options: {request_timeout: 0}", 0.0), ("upstream_options: {request_timeout: 2.5}", 2.5),
    ("upstream_options: {request_timeout: -1}", None), ("upstream_options: {request_timeout: soon}", None),
    ("upstream_options: {request_timeout: true}", None),
])
def test_request_timeout_setting(tmp_path, text, expected):
    from proxy.config import ConfigError, load_config

    path = tmp_path / "config.yaml"
    path.write_text("upstream: redis://127.0.0.1:7000\n" + text + "\n")
    if expected is None:
        with pytest.raises(ConfigError, match="request_timeout"):
            load_config(str(path))
    else:
        assert load_config(str(path)).request_timeout == expected
