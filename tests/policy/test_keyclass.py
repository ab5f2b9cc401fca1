"""Key classes (proxy/policy/keyclass.py): which bytes the patterns tell apart, and that a key's
class decides every verdict the key itself would, for every preset, command and sample key."""

from __future__ import annotations

import fnmatch
import glob
import importlib
import os
import random
import sys
import types
from re import _parser as sre_parse

import pytest

from proxy.commands.table import CommandTable
from proxy.policy import classes, keyclass
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.keyclass import class_table
from proxy.policy.loader import load_policy, load_policy_text
from tests.policy.test_presets import TABLES, _args
from tests.servers import REPO

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

TABLE = CommandTable.from_snapshot()

# (patterns, strings whose bytes share one class, pairs of bytes that must not)
CLASSES = [
    ([rb"[a-z]++"], [b"abz", b"AZ09:_ "], [b"aA", b"a0"]),
    ([rb"[^:]++(?::[^:]++){1,3}+"], [b"aZ09-_."], [b"a:"]),
    ([rb"(?i:usr)x"], [b"uU", b"sS", b"rR"], [b"us", b"ux", b"xX"]),
    ([rb"(?i)usr(?-i:x)"], [b"uU"], [b"xX"]),
    ([fnmatch.translate("cfg:*")], [b"abdeh0189AZ-"], [b"cf", b"c:", b"ca", b"gA"]),
    ([rb"\d+\w"], [b"09", b"aZ_"], [b"0a", b"a-"]),
    ([rb"\bx"], [b"aZ09_"], [b"a-", b"ax"]),
    ([rb"a.c"], [b"bd"], [b"b\n", b"ab"]),
    ([rb"[0-3]", rb"[2-5]"], [b"01", b"23", b"45", b"6a"], [b"12", b"34", b"56"]),
    ([], [b"aA0:._ \x00\x7f"], []),  # no pattern: only the length and non-ASCII bytes count
]


@pytest.mark.parametrize("patterns,same,apart", CLASSES, ids=lambda v: repr(v)[:40])
def test_bytes_share_a_class_exactly_when_no_atom_tells_them_apart(patterns, same, apart):
    table = class_table(patterns)
    assert table is not None
    for group in same:
        assert len(set(group.translate(table))) == 1, group
    for a, b in apart:
        assert table[a] != table[b], (chr(a), chr(b))
    assert all(table[byte] == byte for byte in range(0x80, 0x100))  # character boundaries stay


@pytest.mark.parametrize("pattern", [rb"(a)\1", rb"(?L)a", rb"(?P<x>a)(?(x)b|c)"])
def test_a_pattern_that_compares_bytes_with_bytes_gives_no_table(pattern):
    assert class_table([rb"[a-z]", pattern]) is None


def test_patterns_that_separate_every_byte_give_no_table():
    assert class_table([bytes([byte]) if chr(byte).isalnum() else b"\\x%02x" % byte for byte in range(0x80)]) is None


# -- soundness: a key and any key of its class get the same verdict ---------------------------

PRESETS = sorted(glob.glob(os.path.join(REPO, "configs", "policies", "*.yaml")))
# A template per kind of check (key rules, type words, TTL rules, value rules); {} is the key.
COMMANDS = [
    ["GET", "{}"], ["SET", "{}", "v", "EX", "60"], ["SET", "{}", "v"], ["SETEX", "{}", "60", "v"],
    ["EXPIRE", "{}", "60"], ["PERSIST", "{}"], ["HSET", "{}", "f", "v"], ["LPUSH", "{}", "v"],
    ["SADD", "{}", "m"], ["ZADD", "{}", "1", "m"], ["APPEND", "{}", "v"], ["INCR", "{}"], ["DEL", "{}"],
]
PIECES = ["user", "User", "usr", "prf", "profile", "basic.info", "order_id", "sci-fiction", "string", "hash",
          "list", "zset", "set", "ts", "date", "1000", "7", "20240101", "1700000000", "{1000}", "Ab9",
          "中文", "a b", "x\ny", "", "myApp", "book", "film", "id", "PRO", "shop", "order", "product"]


def seed_keys() -> list[bytes]:
    keys = set()
    for rows in TABLES.values():
        for row in rows:
            args = _args(row.command)
            if len(args) > 1:
                keys.add(args[1])
    return sorted(keys)


def sample_keys(rng: random.Random, count: int) -> list[bytes]:
    keys = seed_keys() + [b"shop:order:1000", b"shop:cart:7:hash", b"shop:product:book:1", b"shop:Order:1"]
    for _ in range(count):
        delimiter = rng.choice([":", ":", ":", ".", "/", "_"])
        keys.append(delimiter.join(rng.choice(PIECES) for _ in range(rng.randint(1, 5))).encode())
    return keys


def variant(key: bytes, table: bytes, rng: random.Random) -> bytes:
    """`key` with each ASCII byte swapped, at random, for another of its class."""
    members: dict[int, list[int]] = {}
    for byte in range(0x80):
        members.setdefault(table[byte], []).append(byte)
    return bytes(rng.choice(members[table[b]]) if b < 0x80 else b for b in key)


def verdict(engine: Engine, args: list[bytes]):
    engine.good_keys.clear()  # decide from the rules, never from an earlier key of the class
    plan = engine.plan_for(args)
    found = None if plan is None else engine.decide(plan, args, (), SessionState())
    if found is None:
        return None
    return (found.reject and found.reject.rule, sorted(f.rule for f in found.findings),
            found.commands is not None)


@pytest.mark.parametrize("path", PRESETS, ids=os.path.basename)
def test_a_keys_class_decides_as_the_key_does(path):
    default = Engine(load_policy(path), TABLE)
    engines = [default, *(default.tenants.engines.values() if default.tenants else ())]
    rng = random.Random(path)
    outcomes = set()
    varied = 0
    for key in sample_keys(rng, 150):
        for engine, template in ((engine, template) for engine in engines for template in COMMANDS):
            args = [key if word == "{}" else word.encode() for word in template]
            plan = engine.plan_for(args)
            if plan is None:
                continue
            # As the server uses them: the memo's table where the plan has one (it covers the
            # command rules too), the key cache's for plans that check key names only.
            table = (plan.key_classes if plan.memo is not None else
                     engine.key_classes if plan.keys_only else None)
            if table is None:
                continue
            expected = verdict(engine, args)
            outcomes.add(expected is None)
            for _ in range(3):
                other = variant(key, table, rng)
                varied += other != key
                assert verdict(engine, [args[0], other, *args[2:]]) == expected, (template, key, other)
    assert outcomes == {True, False} and varied > 500  # both passes and failures were varied


def test_the_strictest_preset_keeps_one_cache_entry_for_the_benchmarks_keys():
    strict = Engine(load_policy(os.path.join(REPO, "configs", "policies", "strict-dotted.yaml")), TABLE)
    for i in range(1000):
        assert strict.key_ok(b"bench:item:%012d:string" % i)
    assert len(strict.good_keys) == 1
    assert not strict.key_ok(b"bench:item:%012d:String" % 1)
    state = SessionState()
    for i in range(1000):
        args = [b"SET", b"bench:item:%012d:string" % i, b"xxx", b"EX", b"3600"]
        plan = strict.plan_for(args)
        if not plan.memo_check.passed(args, state):
            assert strict.decide(plan, args, (), state) is None
    assert len(plan.memo) == 1
    wrong_type = [b"SET", b"bench:item:1:hash", b"xxx", b"EX", b"3600"]
    assert not plan.memo_check.passed(wrong_type, state)
    assert strict.decide(plan, wrong_type, (), state).reject.rule == "K6"


def test_a_rule_that_reads_more_of_the_key_keeps_the_key_itself():
    schema = Engine(load_policy(os.path.join(REPO, "configs", "policies", "key-schema.yaml")), TABLE)
    plans = [schema.plan_for([name.encode()]) for name in ("SET", "HSET")]
    assert all(plan.memo is not None and plan.key_classes is None for plan in plans)
    globbed = Engine(load_policy_text("name: g\nrules:\n  T3: {persistent: ['cfg:*']}\n"), TABLE)
    table = globbed.plan_for([b"EXPIRE"]).key_classes
    assert b"cfg:1".translate(table) != b"cfh:1".translate(table)
    assert b"cfg:1".translate(table) == b"cfg:2".translate(table)


# -- without `re`'s parser (a Python that moved it): no key classes, the same verdicts ----------

def _block(monkeypatch, *names):
    """Make `import name` fail for each of `names`, as on a Python without the module."""
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize("blocked, stand_ins, found", [
    ((), {}, "re._parser"),
    (("re._parser",), {"sre_constants": "re._constants", "sre_parse": "re._parser"}, "sre_parse"),
    (("re._parser", "sre_parse"), {}, None),
    (("re._constants",), {"sre_constants": types.SimpleNamespace(LITERAL=17), "sre_parse": "re._parser"}, None),
], ids=["3.11+", "older", "neither", "constants-missing-names"])
def test_re_parser_is_found_where_this_python_keeps_it(monkeypatch, blocked, stand_ins, found):
    stand_ins = {name: importlib.import_module(module) if isinstance(module, str) else module
                 for name, module in stand_ins.items()}  # the old names, as an older Python has them
    _block(monkeypatch, *blocked)
    for name, module in stand_ins.items():
        monkeypatch.setitem(sys.modules, name, module)
    parser = keyclass.re_parser()
    if found is None:
        assert parser is None
    else:
        assert parser[1] is sys.modules[found] and parser[1].parse is sre_parse.parse


@pytest.mark.parametrize("path", PRESETS[:4] + [os.path.join(REPO, "configs", "policies", "strict-dotted.yaml")],
                         ids=os.path.basename)
def test_without_a_parser_the_engine_uses_keys_as_they_are_and_decides_the_same(monkeypatch, path):
    policy = load_policy(path)  # one policy, so both engines run the same rule objects
    with_classes = Engine(policy, TABLE)
    monkeypatch.setattr(keyclass, "PARSER", None)
    assert class_table([rb"[a-z]++"]) is None
    plain = Engine(policy, TABLE)
    assert with_classes.key_classes is not None and plain.key_classes is None
    assert all(plan.key_classes is None for plan in plain.plans.values())
    keys = sample_keys(random.Random(path), 60)
    decided = 0
    for key in keys:
        for template in COMMANDS:
            args = [key if word == "{}" else word.encode() for word in template]
            plans = with_classes.plan_for(args), plain.plan_for(args)
            assert (plans[0] is None) == (plans[1] is None)
            if plans[0] is None:
                continue
            # twice each: the second answer may come from the caches of names and commands that passed
            first = [_decided(with_classes, plans[0], args) for _ in range(2)]
            assert [_decided(plain, plans[1], args) for _ in range(2)] == first, (template, key)
            decided += 1
    assert decided > 100
    assert bool(plain.good_keys) == bool(with_classes.good_keys)
    assert all(key in keys for key in plain.good_keys)  # names cached as they are, not as classes


def _decided(engine, plan, args):
    """The verdict, with T2's jitter drawn from the same seed every time."""
    for rule in engine.policy.rules:
        if hasattr(rule, "random"):
            rule.random.seed(0)
    found = engine.decide(plan, args, (), SessionState())
    if found is None:
        return None
    return (found.reject and found.reject.rule, sorted(f.rule for f in found.findings), found.commands)


def test_the_sessions_key_class_is_bytes_translate():
    """`classes.key_class`, what the session's loop and the memo compute a key's class with (in
    C when built, cimported by the compiled core), gives bytes.translate's result and errors, for
    every preset's table."""
    from proxy import compiled

    if compiled.load("proxy.resp._compiled_requests") is not None:  # built: the C one is what is tested here
        assert classes.key_class is not bytes.translate
    rng = random.Random(7)
    tables = [None, bytes(range(256)), bytes(reversed(range(256)))]
    for path in sorted(glob.glob(os.path.join(REPO, "configs", "policies", "*.yaml"))):
        tables.append(Engine(load_policy(path), TABLE).key_classes)
    keys = [b"", b"a", b"user:1042:profile", b"\x00\x7f\x80\xff", "ключ:1".encode(),
            *(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 90))) for _ in range(300))]
    for table in tables:
        for key in keys:
            assert classes.key_class(key, table) == bytes.translate(key, table)
            assert type(classes.key_class(key, table)) is bytes
    for bad in (b"short", bytearray(256)[:10]):
        with pytest.raises(ValueError):
            bytes.translate(b"key", bad)
        with pytest.raises(ValueError):
            classes.key_class(b"key", bad)
    for bad_key in ("key", None, bytearray(b"key")):
        with pytest.raises(TypeError):
            classes.key_class(bad_key, None)


@pytest.mark.parametrize("same_class", ["built", "pure"])
def test_same_class_is_key_class_compared(same_class):
    """`classes.same_class(key, table, kept)`, how the session and the memo compare a key with
    the last class that passed (in C without making the class when built), is
    `key_class(key, table) == kept` for every preset's table, kept classes of every length, and
    None (nothing kept yet)."""
    same = classes.same_class if same_class == "built" else classes.pure_same_class
    key_class = classes.key_class
    rng = random.Random(11)
    tables = [None, bytes(range(256)), bytes(reversed(range(256)))]
    for path in sorted(glob.glob(os.path.join(REPO, "configs", "policies", "*.yaml"))):
        tables.append(Engine(load_policy(path), TABLE).key_classes)
    keys = [b"", b"a", b"user:1042:profile", b"user:1043:profile", b"User:1042:profile", b"\x00\x7f\x80\xff",
            *(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(200))]
    for table in tables:
        kept_classes = [None, b"", *(key_class(key, table) for key in keys)]
        for key in keys:
            for kept in [*kept_classes[:40], key_class(key, table), key_class(key, table)[:-1]]:
                assert same(key, table, kept) is (kept is not None and key_class(key, table) == kept)
    with pytest.raises(TypeError):
        same("key", None, b"key")
