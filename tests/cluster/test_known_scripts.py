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


def test_eval_bodies_kept_hashed_only_when_asked_and_forgotten_on_flush():
    known = Known(eval_budget=1000)
    known.saw_eval(BODY)
    known.saw_eval(BODY)
    assert known.any() and known.unhashed == 1 and known.eval_size == len(BODY) + scripts.EVAL_OVERHEAD
    assert not known.eval_shas  # nothing hashed on the way
    evalsha = hiredis.pack_command((b"EVALSHA", SHA.upper(), b"0"))
    assert sent(known.loads_for(evalsha, b"-NOSCRIPT No matching script.\r\n")) == [[b"SCRIPT", b"LOAD", BODY]]
    assert known.unhashed == 0 and known.eval_shas == {SHA: BODY}
    ro = hiredis.pack_command((b"EVALSHA_RO", SHA, b"0"))
    assert known.loads_for(ro, b"-NOSCRIPT x\r\n") is not None
    known.noted([b"SCRIPT", b"FLUSH", b"ASYNC"], b"+OK\r\n")
    assert not known.any() and known.eval_size == 0
    assert known.loads_for(evalsha, b"-NOSCRIPT No matching script.\r\n") is None


def test_eval_bodies_least_recently_run_dropped_past_the_budget():
    each = 16 + scripts.EVAL_OVERHEAD
    known = Known(eval_budget=each + 10)  # one fits, not two
    bodies = [b"return %d -------" % n for n in range(3)]  # 16 bytes each
    known.saw_eval(bodies[0])
    known.saw_eval(b"x" * (each + 11))  # larger than the whole budget: not kept, nothing dropped
    assert list(known.evals) == [bodies[0]]
    known.saw_eval(bodies[1])  # over: the oldest goes
    assert list(known.evals) == [bodies[1]] and known.eval_size == each
    shas = [hashlib.sha1(body).hexdigest().encode() for body in bodies]
    assert known._body(shas[1]) == bodies[1] and known._body(shas[0]) is None
    known.saw_eval(bodies[2])  # drops bodies[1], hashed: its SHA goes too
    assert known.eval_shas == {} and known.unhashed == 1
    assert known._body(shas[1]) is None and known._body(shas[2]) == bodies[2]
    small = Known(eval_budget=2 * (15 + scripts.EVAL_OVERHEAD))
    small.saw_eval(b"a" * 15)
    small.saw_eval(b"b" * 15)
    small.saw_eval(b"a" * 15)  # run again: the most recent now
    small.saw_eval(b"c" * 15)
    assert list(small.evals) == [b"a" * 15, b"c" * 15]
    none = Known(eval_budget=0)
    none.saw_eval(b"")
    assert not none.any()


def test_preloads_of_a_transaction():
    known = Known()
    known.noted([b"SCRIPT", b"LOAD", BODY], b"$40\r\n" + SHA + b"\r\n")
    other = b"return 2"
    known.saw_eval(other)
    other_sha = hashlib.sha1(other).hexdigest().encode()
    loads, count = known.preloads([(b"evalsha", SHA.upper()), (b"evalsha_ro", other_sha), (b"evalsha", SHA),
                                   (b"evalsha", b"0" * 40)])
    assert count == 2 and sent(loads) == [[b"SCRIPT", b"LOAD", BODY], [b"SCRIPT", b"LOAD", other]]
    assert known.preloads([(b"evalsha", b"0" * 40), (b"fcall", b"f")]) is None  # no library known
    known.noted([b"FUNCTION", b"LOAD", CODE], b"$3\r\nlib\r\n")
    loads, count = known.preloads([(b"fcall", b"f"), (b"fcall_ro", b"g")])
    assert count == 1 and sent(loads) == [[b"FUNCTION", b"LOAD", CODE]]  # no REPLACE: one already there stays


def test_script_exists_says_yes_for_what_the_proxy_would_load():
    known = Known()
    other = b"return 2"
    other_sha = hashlib.sha1(other).hexdigest().encode()
    args = [b"SCRIPT", b"EXISTS", SHA, other_sha.upper(), b"0" * 40]
    merge = known.watching(args, lambda replies: replies[0])
    assert merge([b"*3\r\n:0\r\n:0\r\n:0\r\n"]) == b"*3\r\n:0\r\n:0\r\n:0\r\n"
    known.noted([b"SCRIPT", b"LOAD", BODY], b"$40\r\n" + SHA + b"\r\n")
    known.saw_eval(other)
    assert merge([b"*3\r\n:0\r\n:0\r\n:0\r\n"]) == b"*3\r\n:1\r\n:1\r\n:0\r\n"
    assert merge([b"-ERR x\r\n"]) == b"-ERR x\r\n"
