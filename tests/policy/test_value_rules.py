"""V1 (string size), V2 (collection cap: the script's arguments), V3 (element size) through the
engine, as tables. What the scripts do on a real server is in test_value_scripts.py."""

from __future__ import annotations

import pytest

from proxy.policy.decision import SessionState
from proxy.policy.loader import load_policy_text
from proxy.policy.rules._zadd import zadd_members
from proxy.policy.rules.v1_string_size import APPEND_SCRIPT
from proxy.policy.rules.v2_cardinality import GROWING, MAX_SCRIPT_ARGS, SCRIPT
from tests.policy.helpers import load_error
from tests.policy.test_ttl_rules import decide, engine, rejected_by, table, words

V1 = "rules: {V1: {max_bytes: 10}}"
V2 = "rules: {V2: {max_elements: 5, per_type: {hash: 3}}}"
V3 = "rules: {V3: {max_element_bytes: 4}}"
BIG = "x" * 11
FULL = "x" * 10


# -- V1 ----------------------------------------------------------------------------------------

V1_ROWS = [
    (["SET", "k", FULL], None),
    (["SET", "k", BIG], "got 11 bytes"),
    (["SET", "k", BIG, "EX", "5"], "got 11 bytes"),
    (["SETNX", "k", BIG], "got 11 bytes"),
    (["GETSET", "k", BIG], "got 11 bytes"),
    (["SETEX", "k", "5", BIG], "got 11 bytes"),
    (["PSETEX", "k", "5", FULL], None),
    (["MSET", "a", FULL, "b", BIG], "got 11 bytes"),
    (["MSETNX", "a", FULL, "b", FULL], None),
    (["APPEND", "k", BIG], "got 11 bytes"),
    (["SETRANGE", "k", "5", "xxxxx"], None),
    (["SETRANGE", "k", "6", "xxxxx"], "SETRANGE would make it 11 bytes"),
    (["SETRANGE", "k", "100", ""], None),  # an empty value does not grow anything
    (["SETBIT", "k", "79", "1"], None),
    (["SETBIT", "k", "80", "1"], "SETBIT would make it 11 bytes"),
    (["SETBIT", "k", "x", "1"], None),  # Redis refuses it
    (["GET", "k"], None),
]


@pytest.mark.parametrize("command,got", V1_ROWS)
def test_v1(command, got):
    verdict = decide(V1, command)
    if got is None:
        assert rejected_by(verdict) is None
        return
    assert rejected_by(verdict) == "V1"
    assert verdict.reject.advice == f"keep string values at most 10 bytes ({got})"


def test_v1_names_the_key_of_mset():
    assert decide(V1, ["MSET", "a", FULL, "b", BIG]).reject.subject == "key 'b'"


def test_v1_append_is_sent_as_a_script():
    verdict = decide(V1, "APPEND k abc")
    assert verdict.commands == [[b"EVAL", APPEND_SCRIPT, b"1", b"k", b"10",
                                 b"NOPERM key 'k' breaks rule V1 (string size): keep string values at most 10 bytes",
                                 b"abc"]]
    assert decide(V1, ["APPEND", "k", ""]) is None  # nothing grows
    assert decide(V1, "APPEND k") is None  # Redis refuses it


def test_v1_keeps_t1_hidden_expire():
    verdict = decide("rules: {T1: {action: inject, default_ttl: 60}, V1: {max_bytes: 10}}", "APPEND k abc")
    assert verdict.commands[0][:2] == [b"EVAL", APPEND_SCRIPT]
    assert verdict.commands[1] == words("EXPIRE k 60 NX")


# -- V2: the script's arguments ------------------------------------------------------------------

def script_args(command, policy=V2, state=None):
    verdict = decide(policy, command, state=state)
    assert verdict is not None and verdict.reject is None and len(verdict.commands) == 1
    sent = verdict.commands[0]
    assert sent[:2] == [b"EVAL", SCRIPT]
    numkeys = int(sent[2])
    keys = sent[3:3 + numkeys]
    argv = sent[3 + numkeys:]
    protocol, cap, size_command, how, text, most, n = argv[:7]
    candidates = argv[7:7 + int(n)]
    original = argv[7 + int(n):]
    assert original == words(command)
    return keys, protocol, int(cap), size_command, how.decode(), int(most), candidates, text


V2_ROWS = [
    # (command, keys, cap, size command, how, most new, candidates)
    ("HSET h a 1 b 2", [b"h"], 3, b"HLEN", "fields", 2, [b"a", b"b"]),
    ("HMSET h a 1", [b"h"], 3, b"HLEN", "fields", 1, [b"a"]),
    ("HSETNX h a 1", [b"h"], 3, b"HLEN", "fields", 1, [b"a"]),
    ("HINCRBY h a 1", [b"h"], 3, b"HLEN", "fields", 1, [b"a"]),
    ("HINCRBYFLOAT h a 1.5", [b"h"], 3, b"HLEN", "fields", 1, [b"a"]),
    ("LPUSH l a b c", [b"l"], 5, b"LLEN", "push", 3, []),
    ("RPUSH l a", [b"l"], 5, b"LLEN", "push", 1, []),
    ("LPUSHX l a b", [b"l"], 5, b"LLEN", "pushx", 2, []),
    ("RPUSHX l a", [b"l"], 5, b"LLEN", "pushx", 1, []),
    ("LINSERT l BEFORE p x", [b"l"], 5, b"LLEN", "insert", 1, [b"p"]),
    ("LMOVE src dst LEFT RIGHT", [b"dst", b"src"], 5, b"LLEN", "lmove", 1, []),
    ("RPOPLPUSH src dst", [b"dst", b"src"], 5, b"LLEN", "lmove", 1, []),
    ("SADD s a b a", [b"s"], 5, b"SCARD", "members", 3, [b"a", b"b", b"a"]),
    ("SMOVE src dst m", [b"dst", b"src"], 5, b"SCARD", "smove", 1, [b"m"]),
    ("ZADD z 1 a 2 b", [b"z"], 5, b"ZCARD", "zmembers", 2, [b"a", b"b"]),
    ("ZADD z NX CH 1 a", [b"z"], 5, b"ZCARD", "zmembers", 1, [b"a"]),
    ("ZADD z XX 1 a 2 b", [b"z"], 5, b"ZCARD", "zmembers", 0, []),
    ("ZADD z GT INCR 1 a", [b"z"], 5, b"ZCARD", "zmembers", 1, [b"a"]),
    ("ZINCRBY z 1 a", [b"z"], 5, b"ZCARD", "zmembers", 1, [b"a"]),
    ("GEOADD g 13.3 38.1 p 15.0 37.5 q", [b"g"], 5, b"ZCARD", "zmembers", 2, [b"p", b"q"]),
    ("GEOADD g XX 13.3 38.1 p", [b"g"], 5, b"ZCARD", "zmembers", 0, []),
]


@pytest.mark.parametrize("command,keys,cap,size_command,how,most,candidates", V2_ROWS)
def test_v2_script_arguments(command, keys, cap, size_command, how, most, candidates):
    got = script_args(command)
    assert got[:7] == (keys, b"2", cap, size_command, how, most, candidates)
    assert got[7].startswith(b"NOPERM key '" + keys[0] + b"' breaks rule V2 (collection size): keep ")


def test_v2_text_and_protocol():
    state = SessionState()
    state.protocol = 3
    keys, protocol, cap, _, _, _, _, text = script_args("HSET h a 1", state=state)
    assert protocol == b"3"
    assert text == b"NOPERM key 'h' breaks rule V2 (collection size): keep hashes at most 3 elements"
    assert script_args("SADD s a")[7].endswith(b"keep sets at most 5 elements")
    assert script_args("ZADD z 1 a")[7].endswith(b"keep sorted sets at most 5 elements")


@pytest.mark.parametrize("command", [
    "HSET h a", "HSET h a 1 b", "HSETNX h a", "LPUSH l", "LINSERT l MIDDLE p x", "LMOVE a b UP DOWN",
    "RPOPLPUSH a", "SADD s", "SMOVE a b", "ZADD z 1", "ZADD z NX XX 1 a", "ZADD z GT LT 1 a",
    "ZADD z NX GT 1 a", "ZADD z INCR 1 a 2 b", "ZADD z CH", "ZINCRBY z 1", "GEOADD g 1 2",
])
def test_v2_leaves_malformed_commands_to_redis(command):
    assert decide(V2, command) is None


def test_v2_audit_mode_does_not_rewrite():
    assert decide("rules: {V2: {mode: audit}}", "SADD s a") is None


def test_v2_too_long_for_a_script():
    command = ["SADD", "s", *range(MAX_SCRIPT_ARGS)]
    verdict = decide(V2, command)
    assert rejected_by(verdict) == "V2" or verdict.commands[0][7] == b"too_long"


def test_v2_static_rejections():
    command = ["SADD", "s", *range(MAX_SCRIPT_ARGS)]
    assert "split the write" in decide("rules: {V2: {max_elements: 100000}}", command).reject.advice
    assert decide(V2, ["RPUSH", "l", *range(6)]).reject.advice == "keep lists at most 5 elements (RPUSH would add 6)"
    assert rejected_by(decide(V2, ["RPUSH", "l", *range(5)])) is None


def test_v2_keeps_t1_hidden_expire():
    verdict = decide("rules: {T1: {action: inject, default_ttl: 60}, V2: {}}", "HSET h a 1")
    assert verdict.commands[0][:2] == [b"EVAL", SCRIPT]
    assert verdict.commands[1] == words("EXPIRE h 60 NX")


def test_v2_after_c4_like_rewrites_checks_the_command_name():
    """A rewrite that already turned the command into something else is left alone."""
    from proxy.policy.engine import Call

    rule = engine(V2).policy.rule("V2")
    spec = table()["sadd"]
    call = Call([b"EVAL", b"return 1", b"0"], spec, "sadd", [], (), SessionState())
    assert rule.rewrite(call) is None


def test_v2_table_matches_the_command_table():
    """Every command of GROWING writes a collection according to Redis's own COMMAND DOCS (Redis 8's
    HSETEX and VADD: by 8.2's)."""
    from proxy.commands.table import SNAPSHOTS, CommandTable

    newer = CommandTable.from_snapshot(SNAPSHOTS[(8, 2)])
    for name in GROWING:
        spec = table()[name] if name in table() else newer[name]
        assert "write" in spec.flags and spec.group in ("hash", "list", "set", "sorted-set", "geo", "stream",
                                                        "vectorset"), name


@pytest.mark.parametrize("command,parsed", [
    ("ZADD z 1 a", (set(), [b"a"])),
    ("ZADD z nx ch 1 a 2 b", ({b"nx", b"ch"}, [b"a", b"b"])),
    ("ZADD z 1 nx", (set(), [b"nx"])),  # a member named like an option
    ("ZADD z XX NX 1 a", None),
    ("ZADD z INCR 1 a 2 b", None),
    ("ZADD z 1 a 2", None),
])
def test_zadd_members(command, parsed):
    got = zadd_members(words(command))
    assert (None if got is None else (got[0], list(got[1]))) == parsed


# -- V3 ----------------------------------------------------------------------------------------

V3_ROWS = [
    ("HSET h field abcd", None),
    ("HSET h field abcde", "hash field value"),
    ("HSET h longfieldname v", None),  # field names are not values
    ("HMSET h a 1 b abcde", "hash field value"),
    ("HSETNX h a abcde", "hash field value"),
    ("LPUSH l a abcde", "list item"),
    ("RPUSHX l abcde", "list item"),
    ("LINSERT l BEFORE abcdefgh x", None),  # the pivot is not written
    ("LINSERT l BEFORE p abcde", "list item"),
    ("LSET l 0 abcde", "list item"),
    ("SADD s abcde", "set member"),
    ("ZADD z 1 abcde", "sorted-set member"),
    ("ZADD z 12345678 abcd", None),  # scores are not members
    ("ZADD z NX 1 abcde", "sorted-set member"),
    ("ZINCRBY z 1 abcde", "sorted-set member"),
    ("GEOADD g 13.361389 38.115556 abcde", "sorted-set member"),
    ("SET k abcdefgh", None),
]


@pytest.mark.parametrize("command,what", V3_ROWS)
def test_v3(command, what):
    verdict = decide(V3, command)
    if what is None:
        assert rejected_by(verdict) is None
        return
    assert rejected_by(verdict) == "V3"
    assert verdict.reject.advice == f"keep each {what} at most 4 bytes (got 5 bytes)"


# -- settings ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,line,message", [
    ("rules:\n  V1:\n    max_bytes: 0\n", 3, "'max_bytes' must be at least 1"),
    ("rules:\n  V1:\n    max_bytes: 10KB\n", 3, "'max_bytes' must be a whole number"),
    ("rules:\n  V1:\n    max_size: 10\n", 3, "unknown setting(s): max_size"),
    ("rules:\n  V2:\n    max_elements: 1.5\n", 3, "'max_elements' must be a whole number"),
    ("rules:\n  V2:\n    max_elements: 10\n    per_type: {string: 5}\n", 4, "'per_type' names unknown type 'string'"),
    ("rules:\n  V2:\n    per_type: {hash: 0}\n", 3, "'per_type': hash must be a whole number of at least 1"),
    ("rules:\n  V2:\n    per_type: [hash]\n", 3, "'per_type' must be a mapping"),
    ("rules:\n  V3:\n    max_element_bytes: -1\n", 3, "'max_element_bytes' must be at least 1"),
    ("rules:\n  V3:\n    max_bytes: 4\n", 3, "unknown setting(s): max_bytes"),
])
def test_settings_errors(text, line, message):
    error = load_error(text)
    assert error.line == line
    assert message in error.message


def test_defaults():
    v1, v2, v3 = (rule for rule in load_policy_text("rules: {V1: {}, V2: {}, V3: {}}").rules if rule.id != "C2")
    assert v1.max_bytes == 10240
    assert (v2.max_elements, v2.caps) == (5000, {"hash": 100, "list": 5000, "set": 5000, "zset": 5000, "stream": 5000,
                                                 "vectorset": 5000})
    assert v3.max_element_bytes == 1024
    assert load_policy_text("rules: {V2: {per_type: {}}}").rule("V2").caps["hash"] == 5000
