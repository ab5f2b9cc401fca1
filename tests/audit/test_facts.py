"""The two passes that learn a batch's facts: the exact commands sent, and the replies read
back (keys gone between SCAN and TYPE, module types, errors, V4 samples)."""

import hiredis

from proxy.audit.facts import SIZE_COMMANDS, FactsQuery, KeyFacts
from tests.servers import parse_all


def test_size_commands_per_type():
    assert SIZE_COMMANDS == {"string": b"STRLEN", "hash": b"HLEN", "list": b"LLEN", "set": b"SCARD",
                             "zset": b"ZCARD", "stream": b"XLEN", "vectorset": b"VCARD"}  # (Redis 8)


def test_two_passes():
    keys = [b"s", b"h", b"gone", b"m", b"z"]
    query = FactsQuery(keys, memory_samples=5, string_sample=16)
    sent = parse_all(query.first())
    assert sent == [command for key in keys for command in (
        [b"TYPE", key], [b"PTTL", key], [b"MEMORY", b"USAGE", key, b"SAMPLES", b"5"])]
    first = [b"string", 5000, 56, b"hash", -1, 120, b"none", -2, None, b"ReJSON-RL", -1, 90,
             b"zset", 10, hiredis.ReplyError("NOPERM no MEMORY")]
    facts = query.read_first(first)
    assert [f.key for f in facts] == [b"s", b"h", b"m", b"z"]
    assert query.vanished == 1
    sent = parse_all(query.second())
    assert sent == [[b"STRLEN", b"s"], [b"GETRANGE", b"s", b"0", b"15"], [b"HLEN", b"h"], [b"ZCARD", b"z"]]
    assert query.second_count == 4
    query.read_second([3000, b'{"a": 1, "b": 2,', 7, 0])
    assert [(f.type, f.ttl_ms, f.memory, f.length, f.sample) for f in facts] == [
        ("string", 5000, 56, 3000, b'{"a": 1, "b": 2,'),
        ("hash", -1, 120, 7, None),
        ("ReJSON-RL", -1, 90, None, None),  # a module type: no size command
        ("zset", 10, None, 0, None),  # MEMORY USAGE refused; gone before pass two: length 0
    ]


def test_no_string_sample_without_v4():
    query = FactsQuery([b"s"], string_sample=0)
    query.read_first([b"string", -1, 50])
    assert parse_all(query.second()) == [[b"STRLEN", b"s"]]
    assert query.read_second([4])[0].sample is None


def test_a_refused_type_is_an_error_not_a_key():
    query = FactsQuery([b"k"])
    assert query.read_first([hiredis.ReplyError("NOPERM"), -1, None]) == []
    assert query.errors and b"k" not in [f.key for f in query.facts]
    assert repr(KeyFacts(b"k", "set"))  # readable in assertion messages
