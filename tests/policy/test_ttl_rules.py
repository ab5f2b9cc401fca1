"""T1 (TTL mandatory / injected), T2 (jitter), T3 (TTL bounds) through the engine, as tables.

Each row is a command (a string split on spaces, or a list), the later commands of its pipeline,
and what the engine must decide. Rows that need the engine changes this area asked for (rewrite
rules' check() run; `Call.commands` through the rewrite chain) are marked and run as expected
failures until the engine has them.
"""

from __future__ import annotations

import random
import time
from functools import cache

import pytest

from proxy.commands.table import CommandTable
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from proxy.policy.rules._durations import duration
from proxy.policy.rules._ttl import InjectedTtl, creation, may_create, ttl_args
from tests.policy.helpers import load_error, no_baseline


@cache
def table() -> CommandTable:
    return CommandTable.from_snapshot()


@cache
def engine(text: str) -> Engine:
    return Engine(load_policy_text(no_baseline(text)), table())


def words(command) -> list[bytes]:
    if isinstance(command, str):
        command = command.split(" ")
    return [w if isinstance(w, bytes) else str(w).encode() for w in command]


def decide(policy: str, command, later=(), state=None):
    eng = engine(policy)
    args = words(command)
    plan = eng.plan_for(args)
    if plan is None:
        return None
    return eng.decide(plan, args, [words(c) for c in later], state)


def rejected_by(verdict):
    """The id of the rule that rejected, or None when the command goes on."""
    return verdict.reject.rule if verdict is not None and verdict.reject is not None else None



REJECT = "rules: {T1: {action: reject, persistent: ['config:*', 'static:*:v?']}}"
INJECT = "rules: {T1: {action: inject, default_ttl: 600, persistent: ['config:*']}}"
BOUNDS = "rules: {T3: {min_ttl: 1, max_ttl: 2592000, persistent: ['config:*']}}"


# -- which commands can create a key: from the key specs, with T1's table -----------------------

@pytest.mark.parametrize("name,expected", [
    # INSERT / OW key specs
    ("set", True), ("setnx", True), ("mset", True), ("msetnx", True), ("setex", True), ("psetex", True),
    ("lpush", True), ("rpush", True), ("sadd", True), ("hsetnx", True), ("pfadd", True),
    ("sunionstore", True), ("zunionstore", True), ("bitop", True), ("copy", True), ("rename", True),
    ("restore", True), ("lmove", True), ("smove", True), ("append", True),
    # RW + UPDATE on a denyoom command
    ("hset", True), ("hmset", True), ("hincrby", True), ("zadd", True), ("zincrby", True),
    ("incr", True), ("incrbyfloat", True), ("setrange", True), ("setbit", True), ("geoadd", True),
    ("xadd", True), ("getset", True), ("sinterstore", True),
    # cannot create
    ("get", False), ("del", False), ("expire", False), ("persist", False), ("getex", False),
    ("lpushx", False), ("rpushx", False), ("linsert", False), ("lset", False), ("xsetid", False),
    ("hdel", False), ("lpop", False), ("getdel", False), ("move", False), ("xgroup|createconsumer", False),
    ("xgroup|create", True),
])
def test_may_create(name, expected):
    assert may_create(table()[name]) is expected


@pytest.mark.parametrize("command,expected", [
    ("XGROUP CREATE s g $", "never"),
    ("XGROUP CREATE s g $ MKSTREAM", "creates"),
    ("XADD s * f v", "creates"),
    ("XADD s NOMKSTREAM * f v", "never"),
    ("XADD s MAXLEN ~ 10 NOMKSTREAM * f v", "never"),
    ("XADD s * nomkstream v", "creates"),  # a field named like the option
    ("RENAME a b", "carries"),
    ("SET k v", "creates"),
])
def test_creation(command, expected):
    args = words(command)
    assert creation(table().lookup(args), args) == expected


@pytest.mark.parametrize("command,ttls,keep,clear", [
    ("SET k v", [], False, False),
    ("SET k v EX 10", [(4, 1.0, False)], False, False),
    ("SET k v NX px 100 GET", [(5, 0.001, False)], False, False),
    ("SET k v EXAT 1700000000", [(4, 1.0, True)], False, False),
    ("SET k v KEEPTTL", [], True, False),
    ("SET k EX v", [], False, False),  # the value is never an option
    ("GETEX k PERSIST", [], False, True),
    ("GETEX k PXAT 1700000000000", [(3, 0.001, True)], False, False),
    ("SETEX k 10 v", [(2, 1.0, False)], False, False),
    ("PSETEX k 10 v", [(2, 0.001, False)], False, False),
    ("EXPIRE k 10 NX", [(2, 1.0, False)], False, False),
    ("PEXPIREAT k 10", [(2, 0.001, True)], False, False),
    ("RESTORE k 0 payload", [], False, False),
    ("RESTORE k 5000 payload", [(2, 0.001, False)], False, False),
    ("RESTORE k 1700000000000 payload REPLACE ABSTTL", [(2, 0.001, True)], False, False),
    ("PERSIST k", [], False, True),
])
def test_ttl_args(command, ttls, keep, clear):
    args = words(command)
    found = ttl_args(args[0].decode().lower(), args)
    assert (found.ttls, found.keep, found.clear) == (ttls, keep, clear)


# -- T1 reject --------------------------------------------------------------------------------

T1_REJECT_ROWS = [
    # (command, later commands of the pipeline, rejected?)
    ("SET k v", [], True),
    ("SET k v EX 60", [], False),
    ("SET k v PX 60000", [], False),
    ("SET k v EXAT 4000000000", [], False),
    ("SET k v KEEPTTL", [], True),
    ("SET k v KEEPTTL", ["EXPIRE k 60"], False),
    ("SET k v", ["EXPIRE k 60"], False),
    ("SET k v", ["GET x", "PEXPIRE k 60000"], False),
    ("SET k v", ["EXPIRE other 60"], True),
    ("SET k v", ["EXPIRE k 60 XX"], True),  # XX: only keys that already have a TTL
    ("SET k v", ["EXPIRE k 60 GT"], True),  # GT: no TTL counts as infinite
    ("SET k v", ["EXPIRE k 60 NX"], False),
    ("SET k v", ["expireat k 4000000000"], False),
    ("SET k v", ["SET k w EX 5"], False),
    ("SET k v", ["SETEX k 5 w"], False),
    ("SET k v", ["GETEX k EX 5"], False),
    ("SET k v GET", [], True),
    ("SETEX k 60 v", [], False),
    ("PSETEX k 60000 v", [], False),
    ("SETNX k v", [], True),
    ("SETNX k v", ["EXPIRE k 60"], False),
    ("GETSET k v", [], True),
    ("MSET a 1 b 2", ["EXPIRE a 60"], True),
    ("MSET a 1 b 2", ["EXPIRE a 60", "EXPIRE b 60"], False),
    ("HSET h f v", [], True),
    ("HSET h f v", ["EXPIRE h 60"], False),
    ("HINCRBY h f 1", [], True),
    ("INCR counter", [], True),
    ("INCR counter", ["EXPIRE counter 60 NX"], False),
    ("LPUSH l a", [], True),
    ("LPUSHX l a", [], False),  # never creates
    ("LINSERT l BEFORE a b", [], False),
    ("ZADD z 1 a", [], True),
    ("SADD s a", [], True),
    ("XADD s * f v", [], True),
    ("XADD s NOMKSTREAM * f v", [], False),
    ("LMOVE src dst LEFT LEFT", [], True),
    ("LMOVE src dst LEFT LEFT", ["EXPIRE dst 60"], False),
    ("SUNIONSTORE dst a b", [], True),
    ("RENAME a b", [], False),  # b takes a's TTL
    ("COPY a b", [], False),
    ("RESTORE k 0 payload", [], True),
    ("RESTORE k 60000 payload", [], False),
    ("SORT l STORE dst", [], True),
    ("SORT l", [], False),
    ("BITFIELD b GET u8 0", [], False),
    ("BITFIELD b SET u8 0 1", [], True),
    ("GET k", [], False),
    ("EXPIRE k 60", [], False),
    ("PERSIST k", [], True),
    ("GETEX k PERSIST", [], True),
    ("GETEX k EX 60", [], False),
    # persistent keys are exempt
    ("SET config:flags v", [], False),
    ("HSET config:flags f v", [], False),
    ("PERSIST config:flags", [], False),
    ("SET static:x:v1 v", [], False),
    ("SET static:x:v10 v", [], True),
    ("MSET config:a 1 b 2", [], True),
    ("MSET config:a 1 config:b 2", [], False),
]


# A later command counts only when it is certain to apply (issue 14: each of these left a key
# without a TTL): Redis's own syntax and overflow checks, the whole policy, same database, no
# transaction, nothing between that blocks or carries the key away.
T1_LATER_ROWS = [
    ("SET k v", ["EXPIRE k abc"], True),  # not an integer
    ("SET k v", ["EXPIRE k +10"], True),  # Redis's string2ll takes no sign
    ("SET k v", ["EXPIRE k 010"], True),  # nor a leading zero
    ("SET k v", ["EXPIRE k 60 FOO"], True),  # Unsupported option
    ("SET k v", ["EXPIRE k 60 NX XX"], True),  # NX and XX, GT or LT: not compatible
    ("SET k v", ["EXPIRE k 60 GT LT"], True),
    ("SET k v", ["EXPIRE k 60 LT"], False),  # LT applies to a key without a TTL
    ("SET k v", ["EXPIRE k 60 nx"], False),
    ("SET k v", ["EXPIRE k 60 XX", "EXPIRE k 60"], False),  # the second one does it
    ("SET k v", ["EXPIRE k 9223372036854776"], True),  # seconds * 1000 overflows
    ("SET k v", ["PEXPIRE k 9223372036854775807"], True),  # + now overflows
    ("SET k v", ["EXPIREAT k 9223372036854776"], True),
    ("SET k v", ["EXPIREAT k 9223372036854775"], False),
    ("SET k v", ["PEXPIREAT k 9223372036854775807"], False),  # absolute: no base to add
    ("SET k v", ["EXPIRE k 0"], False),  # deletes the key: nothing left without a TTL
    ("SET k v", ["SET k w KEEPTTL EX 5"], True),  # syntax error: nothing set
    ("SET k v", ["SET k w EX 5 KEEPTTL"], True),
    ("SET k v", ["SET k w EX 5 PX 5000"], True),
    ("SET k v", ["SET k w EX 0"], True),  # invalid expire time
    ("SET k v", ["SET k w EX x"], True),
    ("SET k v", ["SET k w NX EX 5"], True),  # k exists: NX sets nothing
    ("SET k v", ["SET k w XX EX 5"], False),
    ("SET k v", ["SET k w GET EX 5"], False),
    ("HSET h f v", ["SET h w GET EX 5"], True),  # GET on a hash: WRONGTYPE, nothing set
    ("HSET h f v", ["SET h w EX 5"], False),
    ("SET k v", ["SETEX k 0 w"], True),
    ("SET k v", ["SETEX k -1 w"], True),
    ("SET k v", ["SETEX k 5"], True),
    ("SET k v", ["PSETEX k 5000 w"], False),
    ("SET k v", ["GETEX k EX 5 PERSIST"], True),
    ("SET k v", ["GETEX k PERSIST EX 5"], True),
    ("SET k v", ["GETEX k EX 5 EX 6"], False),  # the last EX wins, as in Redis
    ("SET k v", ["GETEX k EX 5 PX 6"], True),
    ("HSET h f v", ["GETEX h EX 5"], True),  # WRONGTYPE
    ("INCR c", ["GETEX c PX 5000"], False),
    ("SET k v", ["SELECT 1", "EXPIRE k 60"], True),  # another database's k
    ("SET k v", ["MULTI", "EXPIRE k 60", "DISCARD"], True),
    ("SET k v", ["MULTI", "EXPIRE k 60", "EXEC"], True),  # a WATCH may abort it
    ("SET k v", ["RESET", "EXPIRE k 60"], True),
    ("SET k v", ["QUIT", "EXPIRE k 60"], True),
    ("SET k v", ["BLPOP q 0", "EXPIRE k 60"], True),  # may never return
    ("SET k v", ["RENAME k k2", "EXPIRE k 60"], True),  # k2 keeps no TTL
    ("SET k v", ["COPY k k2", "EXPIRE k 60"], True),
    ("SET k v", ["MOVE k 1", "EXPIRE k 60"], True),
    ("SET k v", ["RENAME other k", "EXPIRE k 60"], False),  # k replaced, then given a TTL
    ("SET k v", ["DEL k", "EXPIRE k 60"], False),
]
WITH_BOUNDS = "rules: {T1: {action: reject}, T3: {min_ttl: 10, max_ttl: 3600}}"


@pytest.mark.parametrize("command,later,rejected", T1_LATER_ROWS)
def test_t1_later_command_certain_to_apply(command, later, rejected):
    assert (rejected_by(decide(REJECT, command, later)) == "T1") is rejected


@pytest.mark.parametrize("later,rejected", [
    (["EXPIRE k 60"], False),
    (["EXPIRE k 7200"], True),  # T3 refuses it: it never runs
    (["EXPIRE k 0"], True),
    (["EXPIRE k 7200", "EXPIRE k 60"], False),
    (["SET k w EX 5"], True),
    (["SETEX k 100 w"], False),
])
def test_t1_later_command_passes_the_whole_policy(later, rejected):
    assert (rejected_by(decide(WITH_BOUNDS, "SET k v", later)) == "T1") is rejected


def test_t1_in_transaction_a_ttl_counts_while_the_key_lives():
    """EXPIRE gives a TTL only to a key that exists; a key deleted, moved or renamed away, or a
    change of database, ends what the transaction knew about it."""
    def run(*commands):
        state = SessionState()
        state.in_multi = True
        for command in commands:
            verdict = decide(REJECT, command, state=state)
            assert verdict is None or verdict.reject is None, (command, verdict.reject)
        return [f.subject for f in state.unmet()]

    assert run("EXPIRE h 60", "HSET h f v") == ["key 'h'"]  # h did not exist at the EXPIRE
    assert run("HSET h f v", "EXPIRE h 60") == []
    assert run("SET k v EX 60", "INCR k") == []
    assert run("SET k v EX 60 XX", "INCR k") == ["key 'k'"]  # XX: maybe nothing set
    assert run("SET k v EX 60", "DEL k", "INCR k") == ["key 'k'"]
    assert run("SET k v EX 60", "LPOP k", "INCR k") == ["key 'k'"]
    assert run("SET k v EX 60", "RENAME k k2", "INCR k") == ["key 'k'"]
    assert run("SET k v EX 60", "MOVE k 1", "INCR k") == ["key 'k'"]
    assert run("SET k v EX 60", "EXPIRE k 0", "INCR k") == ["key 'k'"]  # deleted by the EXPIRE
    assert run("SET k v EXAT 1", "INCR k") == ["key 'k'"]  # a time past: deleted at once
    assert run("HSET h f v", "DEL h", "EXPIRE h 60", "HSET h f v") == ["key 'h'"]
    assert run("SET k v EX 60", "SELECT 1", "INCR k") == ["key 'k'"]  # another database's k
    assert run("SET k v", "SELECT 1", "EXPIRE k 60") == ["key 'k'"]  # owed in database 0 still
    assert run("HSET h f v", "DEL h") == []  # gone: nothing owed


def test_t1_in_transaction_counts_only_certain_ttls():
    state = SessionState()
    state.in_multi = True
    assert decide(REJECT, "SET c 0 EX abc", state=state) is None  # Redis refuses it at EXEC
    assert b"c" not in state.expiring
    assert decide(REJECT, "EXPIRE c 60 XX", state=state) is None
    assert b"c" not in state.expiring
    assert decide(REJECT, "INCR c", state=state) is None
    assert [f.subject for f in state.unmet()] == ["key 'c'"]
    assert decide(REJECT, "EXPIRE c 60", state=state) is None
    assert state.unmet() == []


@pytest.mark.parametrize("command,later,rejected", T1_REJECT_ROWS)
def test_t1_reject(command, later, rejected):
    verdict = decide(REJECT, command, later)
    if rejected:
        assert verdict is not None and verdict.reject is not None, "not rejected"
        assert verdict.reject.rule == "T1"
    else:
        assert verdict is None or verdict.reject is None, verdict.reject


def test_t1_reject_text():
    verdict = decide(REJECT, "HSET user:1 name bob")
    from proxy.errors import violation_text

    assert violation_text(verdict.reject) == (
        "NOPERM key 'user:1' breaks rule T1 (every key has a TTL): send EXPIRE user:1 <seconds> "
        "after it in the same pipeline or transaction")
    assert "KEEPTTL leaves a new key without a TTL" in decide(REJECT, "SET k v KEEPTTL").reject.advice
    assert "add EX <seconds>" in decide(REJECT, "SET k v").reject.advice
    assert "do not remove its TTL" in decide(REJECT, "PERSIST k").reject.advice


def test_t1_reject_audit_mode_forwards():
    verdict = decide("rules: {T1: {mode: audit}}", "SET k v")
    assert verdict.reject is None and verdict.findings[0].rule == "T1" and verdict.findings[0].mode == "audit"


def test_t1_later_scan_is_bounded():
    from proxy.policy.rules.t1_ttl import LATER_SCAN

    filler = ["GET x"] * LATER_SCAN
    assert rejected_by(decide(REJECT, "SET k v", filler[:-1] + ["EXPIRE k 5"])) is None
    assert rejected_by(decide(REJECT, "SET k v", filler + ["EXPIRE k 5"])) == "T1"


def test_t1_reject_in_transaction():
    """Inside MULTI a write without a TTL is not refused at once: the transaction may give the
    key a TTL before EXEC. The state records what is owed; the session checks it at EXEC."""
    state = SessionState()
    state.in_multi = True
    assert decide(REJECT, "INCR c", state=state) is None
    assert [f.rule for f in state.unmet()] == ["T1"]
    assert decide(REJECT, "SET c 0 EX 60", state=state) is None
    assert b"c" in state.expiring and state.unmet() == []
    assert decide(REJECT, "INCR c", state=state) is None
    assert decide(REJECT, "HSET h f v", state=state) is None
    assert [f.subject for f in state.unmet()] == ["key 'h'"]
    assert decide(REJECT, "EXPIRE h 60", state=state) is None
    assert state.unmet() == []
    assert decide(REJECT, "SET c 1 KEEPTTL", state=state) is None  # keeps the TTL given above
    assert decide(REJECT, "SET c 1", state=state) is None  # replaces it: owed again
    assert b"c" not in state.expiring and [f.subject for f in state.unmet()] == ["key 'c'"]
    assert decide(REJECT, "EXPIRE c 5", state=state) is None
    assert b"c" in state.expiring and state.unmet() == []
    assert decide(REJECT, "PERSIST c", state=state).reject is not None
    state.end_transaction()
    assert decide(REJECT, "INCR c", state=state).reject is not None  # outside MULTI: no memory


# -- T1 inject ---------------------------------------------------------------------------------

T1_INJECT_ROWS = [
    # (command, commands sent: None when unchanged)
    ("SET k v", [["SET", "k", "v", "EX", "600"]]),
    ("SET k v NX GET", [["SET", "k", "v", "NX", "GET", "EX", "600"]]),
    ("SET k v EX 60", None),
    ("SET k v KEEPTTL", [["SET", "k", "v", "KEEPTTL"], ["EXPIRE", "k", "600", "NX"]]),
    ("SETEX k 60 v", None),
    ("SETNX k v", [["SETNX", "k", "v"], ["EXPIRE", "k", "600", "NX"]]),
    ("GETSET k v", [["GETSET", "k", "v"], ["EXPIRE", "k", "600", "NX"]]),
    ("MSET a 1 b 2 a 3", [["MSET", "a", "1", "b", "2", "a", "3"], ["EXPIRE", "a", "600", "NX"],
                          ["EXPIRE", "b", "600", "NX"]]),
    ("MSET config:a 1 b 2", [["MSET", "config:a", "1", "b", "2"], ["EXPIRE", "b", "600", "NX"]]),
    ("HSET h f v", [["HSET", "h", "f", "v"], ["EXPIRE", "h", "600", "NX"]]),
    ("INCR c", [["INCR", "c"], ["EXPIRE", "c", "600", "NX"]]),
    ("LMOVE a b LEFT RIGHT", [["LMOVE", "a", "b", "LEFT", "RIGHT"], ["EXPIRE", "b", "600", "NX"]]),
    ("RENAME a b", [["RENAME", "a", "b"], ["EXPIRE", "b", "600", "NX"]]),
    ("RESTORE k 0 payload", [["RESTORE", "k", "0", "payload"], ["EXPIRE", "k", "600", "NX"]]),
    ("RESTORE k 10 payload", None),
    ("LPUSHX l a", None),
    ("SET config:k v", None),
    ("GET k", None),
    ("EXPIRE k 10", None),
]


@pytest.mark.parametrize("command,sent", T1_INJECT_ROWS)
def test_t1_inject(command, sent):
    verdict = decide(INJECT, command)
    if sent is None:
        assert verdict is None or verdict.commands is None
        return
    assert verdict is not None and verdict.reject is None
    assert verdict.commands == [words(c) for c in sent]


def test_t1_inject_marks_its_ttls():
    verdict = decide(INJECT, "HSET h f v")
    assert isinstance(verdict.commands[1][2], InjectedTtl)
    verdict = decide(INJECT, "SET k v")
    assert isinstance(verdict.commands[0][-1], InjectedTtl)


def test_t1_inject_inside_multi_same_output():
    """The session moves hidden extras after EXEC; the engine's output is the same."""
    state = SessionState()
    state.in_multi = True
    assert decide(INJECT, "HSET h f v", state=state).commands == [words("HSET h f v"), words("EXPIRE h 600 NX")]
    assert decide(INJECT, "SET k v", state=state).commands == [words("SET k v EX 600")]


@pytest.mark.parametrize("command", ["PERSIST k", "GETEX k PERSIST"])
def test_t1_inject_rejects_persist(command):
    verdict = decide(INJECT, command)
    assert verdict is not None and verdict.reject is not None and verdict.reject.rule == "T1"


def test_t1_inject_allows_persist_of_persistent_keys():
    verdict = decide(INJECT, "PERSIST config:k")
    assert verdict is None or verdict.reject is None


# -- T2 ----------------------------------------------------------------------------------------

JITTER = "rules: {T1: {action: inject, default_ttl: 1000}, T2: {jitter: 0.1}}"
JITTER_CLIENT = "rules: {T2: {jitter: 0.2, client_ttls: true}}"


def seeded(policy: str, seed: int = 7):
    rule = engine(policy).policy.rule("T2")
    rule.random = random.Random(seed)
    return rule


def test_t2_jitters_injected_ttl_in_set():
    seeded(JITTER)
    seen = set()
    for _ in range(200):
        command = decide(JITTER, "SET k v").commands[0]
        assert command[:4] == words("SET k v EX")
        ttl = int(command[4])
        assert 900 <= ttl <= 1100
        seen.add(ttl)
    assert len(seen) > 50  # really spread


def test_t2_is_reproducible_with_a_seed():
    seeded(JITTER, 1)
    first = [decide(JITTER, "SET k v").commands[0][4] for _ in range(5)]
    seeded(JITTER, 1)
    assert [decide(JITTER, "SET k v").commands[0][4] for _ in range(5)] == first


def test_t2_leaves_client_ttls_by_default():
    seeded(JITTER)
    assert decide(JITTER, "SET k v EX 50") is None
    assert decide(JITTER, "EXPIRE k 50") is None


def test_t2_jitters_hidden_expire():
    seeded(JITTER)
    values = {int(decide(JITTER, "HSET h f v").commands[1][2]) for _ in range(50)}
    assert all(900 <= v <= 1100 for v in values) and len(values) > 10


@pytest.mark.parametrize("command,index,low,high", [
    ("SET k v EX 100", 4, 80, 120),
    ("SET k v PX 100000", 4, 80000, 120000),
    ("SETEX k 100 v", 2, 80, 120),
    ("PSETEX k 100000 v", 2, 80000, 120000),
    ("EXPIRE k 100", 2, 80, 120),
    ("PEXPIRE k 100000 NX", 2, 80000, 120000),
    ("GETEX k EX 100", 3, 80, 120),
    ("RESTORE k 100000 payload", 2, 80000, 120000),
    ("EXPIRE k 1", 2, 1, 1),  # never below 1
])
def test_t2_client_ttls(command, index, low, high):
    seeded(JITTER_CLIENT)
    for _ in range(30):
        verdict = decide(JITTER_CLIENT, command)
        value = int((verdict.commands[0] if verdict else words(command))[index])
        assert low <= value <= high


def test_t2_absolute_times_jitter_the_distance_from_now():
    seeded(JITTER_CLIENT)
    now = int(time.time())
    for _ in range(30):
        value = int(decide(JITTER_CLIENT, f"EXPIREAT k {now + 1000}").commands[0][2])
        assert now + 790 <= value <= now + 1210
    assert decide(JITTER_CLIENT, f"EXPIREAT k {now - 10}") is None  # in the past: deletes the key
    assert decide(JITTER_CLIENT, "EXPIRE k abc") is None  # Redis refuses it


def test_t2_zero_jitter_compiles_out():
    eng = engine("rules: {T2: {jitter: 0, client_ttls: true}}")
    assert eng.plan_for([b"EXPIRE", b"k", b"10"]) is None


# -- T3 ----------------------------------------------------------------------------------------

NOW = int(time.time())
T3_ROWS = [
    ("SET k v EX 60", None),
    ("SET k v EX 0", "got an expiry that deletes the key at once"),
    ("SET k v PX 1", "got 0.001 s"),
    ("SET k v PX 1000", None),
    ("SET k v EX 2592000", None),
    ("SET k v EX 2592001", "got 2592001 s"),
    ("SET k v EX 31536000", "got 365 days"),
    ("SET k v", None),
    ("SETEX k 1 v", None),
    ("PSETEX k 999 v", "got 0.999 s"),
    ("EXPIRE k -1", "got an expiry that deletes the key at once"),
    ("EXPIRE k 7200", None),
    ("PEXPIRE k 500", "got 0.5 s"),
    (f"EXPIREAT k {NOW + 3600}", None),
    (f"EXPIREAT k {NOW + 40 * 86400}", "got"),
    (f"PEXPIREAT k {(NOW - 100) * 1000}", "got an expiry that deletes the key at once"),
    ("GETEX k EX 86400", None),
    ("GETEX k PX 10", "got 0.01 s"),
    ("GETEX k", None),
    ("RESTORE k 0 payload", None),
    ("RESTORE k 10 payload", "got 0.01 s"),
    ("PERSIST k", "do not make it persistent"),
    ("GETEX k PERSIST", "do not make it persistent"),
    ("PERSIST config:x", None),
    ("SET config:x v EX 99999999", None),
    ("EXPIRE k notanumber", None),
]


# Ids without the times (NOW-based), the same in every pytest-xdist worker that collects them.
@pytest.mark.parametrize("command,advice", T3_ROWS, ids=[f"{c.split()[0]} {i}" for i, (c, _) in enumerate(T3_ROWS)])
def test_t3(command, advice):
    verdict = decide(BOUNDS, command)
    if advice is None:
        assert verdict is None or verdict.reject is None, verdict.reject
        return
    assert verdict.reject.rule == "T3"
    assert verdict.reject.advice.startswith("use a TTL between 1 s and 30 days") or \
        verdict.reject.advice.startswith("do not make it persistent")
    assert advice in verdict.reject.advice


def test_t3_text():
    from proxy.errors import violation_text

    assert violation_text(decide(BOUNDS, "SET k v PX 1").reject) == (
        "NOPERM key 'k' breaks rule T3 (TTL bounds): use a TTL between 1 s and 30 days (got 0.001 s)")


@pytest.mark.parametrize("seconds,text", [
    (1, "1 s"), (0.001, "0.001 s"), (2592000, "30 days"), (86400, "1 day"), (7200, "2 h"),
    (90, "90 s"), (120, "2 min"), (2.5, "2.5 s"),
])
def test_duration(seconds, text):
    assert duration(seconds) == text


def test_t1_and_t3_together():
    policy = "rules: {T1: {action: reject}, T3: {}}"
    assert decide(policy, "PERSIST k").reject.rule == "T1"  # both fire; T1 comes first
    assert [f.rule for f in decide(policy, "PERSIST k").findings] == ["T1", "T3"]
    assert decide(policy, "SET k v EX 0").reject.rule == "T3"
    assert decide(policy, "SET k v EX 60") is None


# -- settings ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,line,message", [
    ("rules:\n  T1:\n    action: delete\n", 3, "'action' must be one of reject, inject"),
    ("rules:\n  T1:\n    default_ttl: 0\n", 3, "'default_ttl' must be at least 1"),
    ("rules:\n  T1:\n    action: inject\n    default_ttl: soon\n", 4, "'default_ttl' must be a whole number"),
    ("rules:\n  T1:\n    persistent: {a: 1}\n", 3, "'persistent' must be"),
    ("rules:\n  T1:\n    action: inject\n    ttl: 5\n", 4, "unknown setting(s): ttl"),
    ("rules:\n  T2:\n    jitter: 1.5\n", 3, "'jitter' must be below 1"),
    ("rules:\n  T2:\n    jitter: -0.1\n", 3, "'jitter' must be at least 0"),
    ("rules:\n  T2:\n    client_ttls: yes please\n", 3, "'client_ttls' must be true/false"),
    ("rules:\n  T3:\n    min_ttl: 10\n    max_ttl: 5\n", 4, "'max_ttl' (5) is below 'min_ttl' (10)"),
    ("rules:\n  T3:\n    min_ttl: one\n", 3, "'min_ttl' must be"),
    ("rules:\n  T3:\n    persistent: [a]\n    maximum: 3\n", 4, "unknown setting(s): maximum"),
])
def test_settings_errors(text, line, message):
    error = load_error(text)
    assert error.line == line
    assert message in error.message


def test_defaults():
    policy = load_policy_text("rules: {T1: {}, T2: {}, T3: {}}")
    t1, t2, t3 = (rule for rule in policy.rules if rule.id != "C2")  # C2: every policy's baseline
    assert (t1.action, t1.default_ttl, t1.persistent) == ("reject", 3600, ())
    assert (t2.jitter, t2.client_ttls) == (0.1, False)
    assert (t3.min_ttl, t3.max_ttl, t3.persistent) == (1, 2592000, ())
    inject = load_policy_text("rules: {T1: {action: inject}}").rule("T1")
    assert inject.id == "T1" and inject.action == "inject" and inject.default_ttl == 3600
