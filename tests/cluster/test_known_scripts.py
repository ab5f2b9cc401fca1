"""cluster/scripts.py without a server: what the proxy keeps of the scripts and function libraries
loaded through it, what it forgets, and what it sends a node that lacks one."""

import hashlib

import hiredis

from proxy.backends.cluster import scripts
from proxy.backends.cluster.keyspace import every_node
from proxy.backends.cluster.scripts import Known

BODY = b"return 1"
SHA = hashlib.sha1(BODY).hexdigest().encode()
CODE = b"#!lua name=lib\nredis.register_function('f', function() return 1 end)"


def sent(data: bytes) -> list:
    reader = hiredis.Reader()
    reader.feed(data)
    return list(iter(reader.gets, False))


def test_script_load_is_kept_and_loaded_where_noscript_is_answered():
    known = Known()
    known.noted([b"SCRIPT", b"LOAD", BODY], b"$40\r\n" + SHA + b"\r\n")
    evalsha = hiredis.pack_command((b"EVALSHA", SHA.upper(), b"1", b"k"))
    assert sent(known.loads_for(evalsha, b"-NOSCRIPT No matching script.\r\n")) == [[b"SCRIPT", b"LOAD", BODY]]
    assert known.load_count(b"-NOSCRIPT x\r\n") == 1
    other = hiredis.pack_command((b"EVALSHA", b"0" * 40, b"0"))
    assert known.loads_for(other, b"-NOSCRIPT No matching script.\r\n") is None
    assert known.loads_for(evalsha, b"-ERR something else\r\n") is None
    known.noted([b"script", b"flush"], b"+OK\r\n")
    assert known.loads_for(evalsha, b"-NOSCRIPT No matching script.\r\n") is None and known.size == 0


def test_a_failed_load_is_not_kept():
    known = Known()
    known.noted([b"SCRIPT", b"LOAD", b"syntax error here"], b"-ERR Error compiling script\r\n")
    known.noted([b"FUNCTION", b"LOAD", CODE], b"-ERR Library 'lib' already exists\r\n")
    assert not known.scripts and not known.libraries and known.size == 0


def test_function_libraries_kept_replaced_and_forgotten():
    known = Known()
    known.noted([b"FUNCTION", b"LOAD", CODE], b"$3\r\nlib\r\n")
    known.noted([b"FUNCTION", b"LOAD", b"REPLACE", CODE + b" "], b"$3\r\nlib\r\n")
    assert known.libraries == {b"lib": CODE + b" "} and known.size == len(CODE) + 1
    fcall = hiredis.pack_command((b"FCALL", b"f", b"0"))
    loads = sent(known.loads_for(fcall, b"-ERR Function not found\r\n"))
    assert loads == [[b"FUNCTION", b"LOAD", b"REPLACE", CODE + b" "]]
    assert known.load_count(b"-ERR Function not found\r\n") == 1
    known.noted([b"FUNCTION", b"DELETE", b"lib"], b"+OK\r\n")
    assert known.loads_for(fcall, b"-ERR Function not found\r\n") is None and known.size == 0
    known.noted([b"FUNCTION", b"LOAD", CODE], b"$3\r\nlib\r\n")
    known.noted([b"FUNCTION", b"FLUSH"], b"+OK\r\n")
    assert not known.libraries and known.size == 0


def test_bounded_in_bytes(monkeypatch):
    monkeypatch.setattr(scripts, "MAX_BYTES", 20)
    known = Known()
    known.noted([b"SCRIPT", b"LOAD", b"return 1"], b"$40\r\n" + b"0" * 40 + b"\r\n")
    known.noted([b"SCRIPT", b"LOAD", b"return 22222222222222"], b"$40\r\n" + b"0" * 40 + b"\r\n")
    assert list(known.scripts.values()) == [b"return 1"] and known.size == 8


def test_replicas_get_what_redis_keeps_per_node_and_changes():
    assert every_node({"request_policy:all_nodes", "response_policy:all_succeeded"})  # SCRIPT LOAD, CONFIG SET
    assert not every_node({"request_policy:all_nodes", "nondeterministic_output"})  # SLOWLOG GET: masters'
    assert not every_node({"request_policy:all_shards", "response_policy:all_succeeded"})  # FUNCTION LOAD
