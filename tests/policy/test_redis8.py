"""Redis 7.4 / 8's new ways to write (issue 52), as an attacker would try them, each held to the rules
the old ways meet: HSETEX's fields (V2 counts them, V3 measures the values, T1 wants the key's TTL,
T3 bounds the fields' TTL), the hash-field TTL commands (HEXPIRE..., HGETEX: T3), vector sets
(VADD, VSETATTR: V2, V3, K6, K10, T1). The engine on the 8.2 snapshot; then the V2 script and T1's
injection against a real Redis 8 where the tests' redis-server is one (the ./dev test 8.x leg)."""

from __future__ import annotations

import time
from functools import cache

import pytest

from proxy.commands.table import SNAPSHOTS, CommandTable
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from proxy.policy.rules._fields import hsetex_fields, vadd_dimension, vadd_parts
from tests.policy.helpers import no_baseline
from tests.servers import RedisServer, redis_server_version


@cache
def table() -> CommandTable:
    return CommandTable.from_snapshot(SNAPSHOTS[(8, 2)])


@cache
def engine(text: str) -> Engine:
    return Engine(load_policy_text(no_baseline(text)), table())


def decide(policy: str, command: str, later=()):
    eng = engine(policy)
    args = [w.encode() for w in command.split(" ")]
    plan = eng.plan_for(args)
    if plan is None:
        return None  # no rule applies
    return eng.decide(plan, args, [[w.encode() for w in c.split(" ")] for c in later], None)


def rejected_by(verdict):
    return verdict.reject.rule if verdict is not None and verdict.reject is not None else None


T1 = "rules: {T1: {action: reject}}"
T3 = "rules: {T3: {min_ttl: 60, max_ttl: 86400}}"
V3 = "rules: {V3: {max_element_bytes: 8}}"
V2 = "rules: {V2: {per_type: {hash: 3, vectorset: 3}}}"


def test_the_8_2_snapshot_has_the_new_writers():
    for name in ("hsetex", "hgetex", "hexpire", "hpersist", "hgetdel", "vadd", "vrem", "vsetattr", "xdelex", "xackdel"):
        assert name in table(), name
    assert table()["vadd"].group == "vectorset"  # COMMAND DOCS: group module, module vectorset


@pytest.mark.parametrize("args, expected", [
    ("hsetex k FIELDS 2 a 1 b 2", (set(), [b"a", b"1", b"b", b"2"])),
    ("hsetex k FXX EX 10 FIELDS 1 ex 5", ({b"fxx", b"ex"}, [b"ex", b"5"])),
    ("hsetex k FIELDS 2 a 1", None),  # numfields does not match: Redis refuses
    ("hsetex k FIELDS 1 a 1 EX 10", None),  # the FIELDS block must end the command
    ("hsetex k NOPE FIELDS 1 a 1", None),
])
def test_hsetex_fields(args, expected):
    found = hsetex_fields(args.split(" ") and [w.encode() for w in args.split(" ")])
    assert (found if found is None else (set(found[0]), list(found[1]))) == expected


@pytest.mark.parametrize("args, expected", [
    ("vadd k VALUES 2 1 2 e1", (b"e1", [])),
    ("vadd k REDUCE 2 VALUES 3 1 2 3 e1 CAS Q8 EF 200 SETATTR {} M 16", (b"e1", [b"{}"])),
    ("vadd k FP32 abcdefgh e9 SETATTR x SETATTR y", (b"e9", [b"x", b"y"])),
    ("vadd k VALUES 2 1 2", None),
    ("vadd k e4 VALUES 2 1 2", None),
])
def test_vadd_parts(args, expected):
    found = vadd_parts([w.encode() for w in args.split(" ")])
    assert (found if found is None else (found[0], list(found[1]))) == expected


# -- T1: the key's TTL; a field TTL is not one -----------------------------------------------------

@pytest.mark.parametrize("command, later, rule", [
    ("HSETEX k FIELDS 1 f v", (), "T1"),
    ("HSETEX k EX 60 FIELDS 1 f v", (), "T1"),  # the fields' TTL: the key still has none
    ("HSETEX k EX 60 FIELDS 1 f v", ("EXPIRE k 60",), None),
    ("VADD k VALUES 2 1 2 e", (), "T1"),
    ("VADD k VALUES 2 1 2 e", ("EXPIRE k 60",), None),
    ("HEXPIRE k 60 FIELDS 1 f", ("EXPIRE x 60",), None),  # touches existing fields only
    ("HGETEX k PERSIST FIELDS 1 f", (), None),  # the fields' TTL, not the key's
    ("HPERSIST k FIELDS 1 f", (), None),
])
def test_t1_on_the_new_writes(command, later, rule):
    assert rejected_by(decide(T1, command, later)) == rule


def test_t1_inject_gives_hsetex_and_vadd_keys_a_ttl():
    for command in ("HSETEX k EX 60 FIELDS 1 f v", "VADD k VALUES 2 1 2 e"):
        verdict = decide("rules: {T1: {action: inject, default_ttl: 600}}", command)
        assert verdict.commands[1:] == [[b"EXPIRE", b"k", b"600", b"NX"]], command


# -- T3: a field's TTL within the same bounds as a key's ---------------------------------------------

@pytest.mark.parametrize("command, rule", [
    ("HSETEX k EX 1 FIELDS 1 f v", "T3"),
    ("HSETEX k PX 999999999999 FIELDS 1 f v", "T3"),
    ("HSETEX k EX 600 FIELDS 1 f v", None),
    ("HSETEX k KEEPTTL FIELDS 1 f v", None),
    ("HSETEX k FIELDS 1 ex 1", None),  # a field named "ex": no option
    ("HGETEX k EX 1 FIELDS 1 f", "T3"),
    ("HGETEX k EX 600 FIELDS 1 f", None),
    ("HGETEX k PERSIST FIELDS 1 f", None),  # the fields live as long as the key
    ("HEXPIRE k 1 FIELDS 1 f", "T3"),
    ("HEXPIRE k 600 FIELDS 1 f", None),
    ("HPEXPIRE k 5000 FIELDS 1 f", "T3"),
    ("HEXPIREAT k <now+10s> FIELDS 1 f", "T3"),  # (the time is read in the test: ids stay the same in
    ("HPEXPIREAT k <now+600s in ms> FIELDS 1 f", None),  # every xdist worker)
    ("HPERSIST k FIELDS 1 f", None),
])
def test_t3_bounds_field_ttls(command, rule):
    now = time.time()
    command = command.replace("<now+10s>", str(int(now) + 10)).replace("<now+600s in ms>", str(int(now * 1000) + 600_000))
    verdict = decide(T3, command)
    assert rejected_by(verdict) == rule
    if rule:
        assert "fields of key 'k'" in str(verdict.reject.subject)


# -- V3 and V2: HSETEX and vector sets --------------------------------------------------------------

@pytest.mark.parametrize("command, rule", [
    ("HSETEX k FIELDS 2 a 1 b 123456789", "V3"),
    ("HSETEX k FIELDS 1 a 12345678", None),
    ("VADD k VALUES 2 1 2 element-too-long", "V3"),
    ("VADD k VALUES 2 1 2 e SETATTR attribute-too-long", "V3"),
    ("VADD k VALUES 2 1 2 e SETATTR {}", None),
    ("VSETATTR k e attribute-too-long", "V3"),
    ("VSETATTR k e {}", None),
])
def test_v3_on_the_new_writes(command, rule):
    assert rejected_by(decide(V3, command)) == rule


V3_DIMS = "rules: {V3: {max_vector_dimensions: 3}}"
FP32_3 = "\x00" * 12  # three float32 zeros
FP32_4 = "\x00" * 16


@pytest.mark.parametrize("args, expected", [
    ("VADD k VALUES 3 1 2 3 e", (3, "VALUES 3")),
    ("VADD k REDUCE 2 VALUES 4 1 2 3 4 e", (4, "VALUES 4")),  # the vector as sent, before REDUCE
    (f"VADD k FP32 {FP32_4} e", (4, "an FP32 blob of 16 bytes")),
    ("VADD k FP32 abcdefg e", None),  # not a multiple of 4: Redis refuses it
    ("VADD k VALUES x 1 e", None),
    ("VADD k VALUES 0 e", None),
    ("VADD k", None),
])
def test_vadd_dimension(args, expected):
    assert vadd_dimension([w.encode("latin-1") for w in args.split(" ")]) == expected


@pytest.mark.parametrize("command, rule", [
    ("VADD k VALUES 3 1 2 3 e", None),
    ("VADD k VALUES 4 1 2 3 4 e", "V3"),
    ("VADD k REDUCE 2 VALUES 4 1 2 3 4 e", "V3"),
    (f"VADD k FP32 {FP32_3} e", None),
    (f"VADD k FP32 {FP32_4} e CAS", "V3"),
    ("VADD k VALUES 999999999 1 e", "V3"),  # the count alone says it (Redis would refuse it too)
])
def test_v3_bounds_a_vector_s_dimension(command, rule):
    verdict = decide(V3_DIMS, command)
    assert rejected_by(verdict) == rule
    if rule:
        reject = str(verdict.reject.subject) + " " + str(verdict.reject.advice)
        assert "key 'k'" in reject and "at most 3 dimensions" in reject and "got " in reject


def test_v3_s_default_bounds_vectors_at_4096_dimensions():
    values = " ".join(["1"] * 4097)
    assert rejected_by(decide("rules: {V3: {}}", f"VADD k VALUES 4096 {values.rpartition(' ')[0]} e")) is None
    assert rejected_by(decide("rules: {V3: {}}", f"VADD k VALUES 4097 {values} e")) == "V3"


def test_v3_s_vector_limit_is_checked_at_load():
    from proxy.policy.base import PolicyError

    with pytest.raises(PolicyError, match="max_vector_dimensions"):
        load_policy_text(no_baseline("rules: {V3: {max_vector_dimensions: 0}}"))


@pytest.mark.parametrize("command, size_command, candidates", [
    ("HSETEX k FIELDS 2 a 1 b 2", b"HLEN", [b"a", b"b"]),
    ("HSETEX k FXX FIELDS 1 a 1", b"HLEN", []),  # FXX adds no field
    ("VADD k VALUES 2 1 2 e", b"VCARD", [b"e"]),
])
def test_v2_sends_the_new_growing_writes_as_its_script(command, size_command, candidates):
    script = decide(V2, command).commands[0]
    assert script[:2] == [b"EVAL", script[1]] and size_command in script
    args = command.encode().split(b" ")
    n = int(script[3 + 7])  # after EVAL body numkeys key: protocol cap size how text most n
    assert script[3 + 8:3 + 8 + n] == candidates and script[-len(args):] == args


# -- K6 and K10: a vector set is a type of its own --------------------------------------------------

def test_k6_and_k10_know_vector_sets():
    words = "rules: {K6: {delimiter: ':', words: {hash: hash, vectorset: vectors}}}"
    assert rejected_by(decide(words, "VADD user:hash VALUES 2 1 2 e")) == "K6"
    assert rejected_by(decide(words, "VADD user:vectors VALUES 2 1 2 e")) is None
    schema = "schema:\n  - {key: 'user:{id}', type: hash}\n  - {key: 'near:{id}', type: vectorset}\nrules: {K10: {}}"
    assert rejected_by(decide(schema, "VADD user:1 VALUES 2 1 2 e")) == "K10"
    assert rejected_by(decide(schema, "HSETEX user:1 FIELDS 1 f v")) is None
    assert rejected_by(decide(schema, "VADD near:1 VALUES 2 1 2 e")) is None
    assert rejected_by(decide(schema, "HSET near:1 f v")) == "K10"


# -- against a real Redis 8 -------------------------------------------------------------------------

needs_redis_8 = pytest.mark.skipif((redis_server_version() or (0,)) < (8,),
                                   reason="the tests' redis-server is older than Redis 8 (the ./dev test 8.x leg runs these)")


@pytest.fixture(scope="module")
def server():
    process = RedisServer()
    yield process
    process.close()


@needs_redis_8
@pytest.mark.parametrize("command, grows", [
    ("HSETEX k FIELDS 2 a 1 b 2", "HSET k x 1 y 2"),
    ("VADD k VALUES 2 1 2 e", "VADD k VALUES 2 1 2 x;VADD k VALUES 2 1 2 y"),
])
def test_v2_caps_the_new_writes_on_redis_8(server, command, grows):
    import redis

    client = redis.Redis(port=server.port)
    try:
        client.flushall()
        assert client.execute_command(*decide(V2, command).commands[0]) in (1, 2)  # written: room left
        for grow in grows.split(";"):
            client.execute_command(*grow.split(" "))  # 3 elements or more now
        script = decide(V2, command.replace(" a ", " c ").replace(" e", " f")).commands[0]
        with pytest.raises(redis.ResponseError, match="rule V2"):
            client.execute_command(*script)  # a fourth element: over the cap of 3
        assert client.execute_command(*decide(V2, command).commands[0]) in (0, 1)  # the same ones again: nothing new
    finally:
        client.close()


@needs_redis_8
@pytest.mark.parametrize("command, dimension", [
    ("VADD v VALUES 3 1 2 3 e", 3),
    (f"VADD v FP32 {FP32_3} e", 3),
    ("VADD v REDUCE 2 VALUES 3 1 2 3 e", 2),  # stored reduced: the limit reads what was sent
])
def test_v3_reads_the_dimension_redis_8_reads(server, command, dimension):
    import redis

    client = redis.Redis(port=server.port)
    try:
        client.delete("v")
        args = [w.encode("latin-1") for w in command.split(" ")]
        assert rejected_by(decide(V3_DIMS, command)) is None  # 3 dimensions sent: within 3
        assert client.execute_command(*args) in (1, True)
        assert client.execute_command("VDIM", "v") == dimension
        wider = command.replace("VALUES 3 1 2 3", "VALUES 4 1 2 3 4").replace(FP32_3, FP32_4)
        assert rejected_by(decide(V3_DIMS, wider)) == "V3"
        client.delete("v")
        wider_args = [w.encode("latin-1") for w in wider.split(" ")]
        assert client.execute_command(*wider_args) in (1, True)  # Redis takes it: 4 dimensions
        assert client.execute_command("VDIM", "v") == (2 if "REDUCE" in wider else 4)
    finally:
        client.close()


# -- XADD's options in any order (7.0 too), and 8.2's KEEPREF / DELREF / ACKED ------------------------

@pytest.mark.parametrize("command", [
    "XADD s KEEPREF * f v",
    "XADD s ACKED MAXLEN ~ 10 * f v",
    "XADD s MAXLEN 10 NOMKSTREAM * f v",  # (before: read as no entry at all, and forwarded unchecked)
    "XADD s LIMIT 5 MAXLEN ~ 10 * f v",
])
def test_v2_caps_xadd_whatever_the_order_of_its_options(command):
    script = decide("rules: {V2: {per_type: {stream: 3}}}", command).commands[0]
    assert script[0] == b"EVAL" and b"XLEN" in script


def test_xadd_exact_maxlen_within_the_cap_anywhere_needs_no_script():
    assert decide("rules: {V2: {per_type: {stream: 3}}}", "XADD s KEEPREF MAXLEN = 3 * f v") is None or \
        decide("rules: {V2: {per_type: {stream: 3}}}", "XADD s KEEPREF MAXLEN = 3 * f v").commands is None


@pytest.mark.parametrize("command, rule", [
    ("XADD s MAXLEN 10 NOMKSTREAM * f v", None),  # NOMKSTREAM after MAXLEN: creates nothing
    ("XADD s KEEPREF * f v", "T1"),
])
def test_t1_reads_nomkstream_anywhere(command, rule):
    assert rejected_by(decide(T1, command)) == rule


@pytest.mark.parametrize("op", ["DIFF", "DIFF1", "ANDOR", "ONE"])
def test_8_2_bitop_operations_are_measured_by_v1_on_the_server(op):
    script = decide("rules: {V1: {max_bytes: 10}}", f"BITOP {op} d a b").commands[0]
    assert script[0] == b"EVAL" and script[-5:] == [b"BITOP", op.encode(), b"d", b"a", b"b"]
