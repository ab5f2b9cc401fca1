"""The key schema (`schema:` and rule K10), its per-pattern TTL rule and limits (T1, T3, V1, V2),
and `redis-guard schema docs`: no server needed (tests/integration/test_schema_proxy.py has
the proxy in front of a real Redis).

The type-family tests walk Redis's own command table: every command of a typed group, on a key
of every type, is rejected exactly when the types differ.
"""

from __future__ import annotations

import functools
import os
import re
import textwrap

import pytest
import yaml

from proxy import cli
from proxy.commands.keyspecs import find_keys
from proxy.commands.table import CommandTable
from proxy.errors import violation_text
from proxy.policy.base import AUDIT, ENFORCE
from proxy.policy.decision import SessionState
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from proxy.policy.rules._types import GROUP_TYPES, TYPES
from proxy.policy.schemadoc import COLUMNS, markdown
from tests.policy.helpers import load_error
from tests.servers import REPO

TABLE = CommandTable.from_snapshot()
PRESET = os.path.join(REPO, "configs", "policies", "key-schema.yaml")
DOCS = os.path.join(REPO, "docs", "policy.md")


def policy_text(schema: str, rules: str = "K10: {}", mode: str = "enforce") -> str:
    return (f"name: t\nmode: {mode}\nrules:\n{textwrap.indent(textwrap.dedent(rules), '  ')}\n"
            f"schema:\n{textwrap.indent(textwrap.dedent(schema), '  ')}")


@functools.cache
def engine(schema: str, rules: str = "K10: {}", mode: str = "enforce") -> Engine:
    return Engine(load_policy_text(policy_text(schema, rules, mode)), TABLE)


def as_args(command) -> list[bytes]:
    parts = command.split() if isinstance(command, str) else command
    return [p if isinstance(p, bytes) else str(p).encode() for p in parts]


def decide(eng: Engine, command, later=()):
    args = as_args(command)
    plan = eng.plan_for(args)
    if plan is None:
        return None
    return eng.decide(plan, args, [as_args(c) for c in later], SessionState())


def rejected_by(eng: Engine, command, later=()) -> str | None:
    verdict = decide(eng, command, later)
    return verdict.reject.rule if verdict is not None and verdict.reject is not None else None


BOOKS = """
- key: "book:{id}"
  type: hash
  placeholders: {id: digits}
  description: "one book"
  owner: catalog
  relationships: ["books:genre:{genre}", "books:sales-rank"]
- key: "books:genre:{genre}"
  type: set
  placeholders: {genre: slug}
- key: "books:sales-rank"
  type: zset
  relationships: "every book key, by copies sold"
- key: "global:{entity}"
  type: string
  placeholders:
    entity: {enum: [book, film]}
"""


# -- loading: every mistake with its line ------------------------------------------------------

LOAD_ERRORS = [
    # (schema, the line reported, a part of the message)
    ('- key: "a:{id}"\n  type: hashmap\n', 7, "'type' must be one of string, list, hash, set, zset, stream"),
    ('- key: "a:{id}"\n  type: hash\n  colour: red\n', 8, "unknown setting 'colour'"),
    ("- type: hash\n", 6, "an entry without 'key'"),
    ('- key: "a:{id}"\n', 6, "'type' must be one of"),
    ('- key: ""\n  type: hash\n', 6, "'key' must be a non-empty string"),
    ('- "a:{id}"\n', 6, "each entry must be a mapping"),
    ('- key: "a:{id}"\n  type: hash\n  placeholders: {id: number}\n', 8, "must be any, digits, slug, uuid"),
    ('- key: "a:{id}"\n  type: hash\n  placeholders:\n    id: digits\n    name: slug\n', 10,
     "names {name}, which the key pattern does not have"),
    ('- key: "a:{id}:{id}"\n  type: hash\n', 6, "placeholder {id} appears twice"),
    ('- key: "a:{x}{y}"\n  type: hash\n', 6, "need a literal between them"),
    ('- key: "a:{id"\n  type: hash\n', 6, "write a literal brace as '{{' or '}}'"),
    ('- key: "a:{id:digits}"\n  type: hash\n', 6, "constrain it under 'placeholders:'"),
    ('- key: "a:{0}"\n  type: hash\n', 6, "placeholder {0} must be a name"),
    ('- key: "a:{id}"\n  type: hash\n  placeholders:\n    id: {regex: "(x|y)"}\n', 9, "must not capture"),
    ('- key: "a:{id}"\n  type: hash\n  placeholders:\n    id: {regex: "[x"}\n', 9, "invalid regex"),
    ('- key: "a:{id}"\n  type: hash\n  placeholders:\n    id: {regex: "é"}\n', 9, "ASCII regex"),
    ('- key: "a:{id}"\n  type: hash\n  placeholders:\n    id: {enum: []}\n', 9, "non-empty list"),
    ('- key: "a:{id}"\n  type: hash\n- key: "a:{id}"\n  type: set\n', 8, "declared twice (first at line 6)"),
    ('- key: "books:{name}"\n  type: set\n- key: "books:sales-rank"\n  type: zset\n', 8,
     "'books:sales-rank' overlaps 'books:{name}' (line 6): both match 'books:sales-rank'"),
    ('- key: "book:{id}"\n  type: hash\n  placeholders: {id: digits}\n- key: "book:{slug}"\n  type: hash\n'
     '  placeholders: {slug: slug}\n', 9, "overlaps 'book:{id}' (line 6): both match 'book:1'"),
    ('- key: "{kind}:x"\n  type: hash\n- key: "y:{name}"\n  type: set\n', 8, "both match 'y:x'"),
    ('- key: "a:{id}"\n  type: hash\n  relationships: ["b:{id}"]\n', 8, "relationship 'b:{id}' is not a declared"),
    ('- key: "a:{id}"\n  type: hash\n  relationships: {b: c}\n', 8, "free text or a list of pattern names"),
    ('- key: "a:{id}"\n  type: hash\n  ttl: forever\n', 8, "'ttl' must be 'required', 'none'"),
    ('- key: "a:{id}"\n  type: hash\n  ttl: {min: 60, max: 10}\n', 8, "max (10) is below min (60)"),
    ('- key: "a:{id}"\n  type: hash\n  ttl: {min: 0}\n', 8, "at least 1"),
    ('- key: "a:{id}"\n  type: hash\n  limits: {max_bytes: 10}\n', 8, "'max_bytes' limits string values, not a hash"),
    ('- key: "a:{id}"\n  type: string\n  limits: {max_elements: 10}\n', 8, "limits collections"),
    ('- key: "a:{id}"\n  type: string\n  limits: {max_size: 10}\n', 8, "unknown limit 'max_size'"),
    ('- key: "a:{id}"\n  type: string\n  limits: {max_bytes: 0}\n', 8, "at least 1"),
    ('- key: "a:{id}"\n  type: string\n  ttl: required\n', 6, "sets ttl: required, which rule T1 enforces"),
    ('- key: "a:{id}"\n  type: string\n  ttl: {max: 60}\n', 6, "which rule T1 enforces"),
    ('- key: "a:{id}"\n  type: string\n  limits: {max_bytes: 10}\n', 6, "which rule V1 enforces"),
    ('- key: "a:{id}"\n  type: list\n  limits: {max_elements: 10}\n', 6, "which rule V2 enforces"),
    ("{key: a}\n", 6, "'schema' must be a list"),
]


@pytest.mark.parametrize("schema,line,message", LOAD_ERRORS, ids=[m for _, _, m in LOAD_ERRORS])
def test_load_errors_name_their_line(schema, line, message):
    error = load_error(policy_text(schema), "p.yaml")
    assert error.line == line, str(error)
    assert message in error.message, error.message
    assert str(error).startswith(f"p.yaml:{line}: ")


def test_rule_needs_and_bounds_errors():
    error = load_error("name: t\nrules:\n  K2: {}\n  K10: {strict: true}\n")
    assert error.line == 4 and "needs the policy's 'schema:'" in error.message
    schema = '- key: "a:{id}"\n  type: string\n  ttl: {min: 90}\n'
    error = load_error(policy_text(schema, "T1: {}\nT3: {max_ttl: 60}"))
    assert error.line == 7 and "leave no TTL" in error.message
    error = load_error(policy_text(schema, "T1: {}"))
    assert "rule T3" in error.message
    # named with mode off: documented, not enforced; loads
    load_policy_text(policy_text(schema, "T1: off\nT3: off"))


def test_no_overlap_when_a_placeholder_is_constrained():
    schema = ('- key: "books:{genre}"\n  type: set\n  placeholders:\n    genre: {enum: [sci-fiction, teen]}\n'
              '- key: "books:sales-rank"\n  type: zset\n- key: "book:{id}"\n  type: hash\n'
              '  placeholders: {id: digits}\n- key: "book:{isbn}"\n  type: string\n'
              '  placeholders:\n    isbn: {regex: "isbn-[0-9]{13}"}\n')
    policy = load_policy_text(policy_text(schema))
    assert [p.pattern for p in policy.schema] == ["books:{genre}", "books:sales-rank", "book:{id}", "book:{isbn}"]


def test_schema_without_k10_documents_only():
    policy = load_policy_text("name: t\nrules:\n  K2: {}\nschema:\n" + textwrap.indent(BOOKS, "  "))
    assert policy.rule("K10") is None and len(policy.schema) == 4
    eng = Engine(policy, TABLE)
    assert rejected_by(eng, "SET book:1 v") is None
    assert rejected_by(eng, "SET undeclared:1 v") is None
    assert load_policy_text("name: t\nschema:\n").schema is None


# -- matching -----------------------------------------------------------------------------------

MATCHES = [
    # (key pattern, placeholders, key, matches)
    ("book:{id}", "", "book:1", True),
    ("book:{id}", "", "book:x-y.z", True),
    ("book:{id}", "", "book:", False),
    ("book:{id}", "", "book:1:2", False),  # one segment
    ("book:{id}", "", "xbook:1", False),
    ("book:{id}", "{id: digits}", "book:123", True),
    ("book:{id}", "{id: digits}", "book:12a", False),
    ("u:{name}", "{name: slug}", "u:sci-fiction", True),
    ("u:{name}", "{name: slug}", "u:Sci-fiction", False),
    ("u:{name}", "{name: slug}", "u:sci--fiction", False),
    ("u:{name}", "{name: slug}", "u:-sci", False),
    ("s:{id}", "{id: uuid}", "s:123e4567-e89b-12d3-a456-426614174000", True),
    ("s:{id}", "{id: uuid}", "s:123e4567-e89b-12d3-a456-42661417400", False),
    ("f:{fmt}", "{fmt: {enum: [dvd, bluray]}}", "f:dvd", True),
    ("f:{fmt}", "{fmt: {enum: [dvd, bluray]}}", "f:vhs", False),
    ("f:{fmt}", "{fmt: {enum: [a, ab]}}", "f:ab", True),
    ("f:{fmt}", "{fmt: {enum: [2024, 2025]}}", "f:2024", True),
    ("d:{day}", "{day: {regex: '[0-9]{8}'}}", "d:20241122", True),
    ("d:{day}", "{day: {regex: '[0-9]{8}'}}", "d:2024112", False),
    ("p:{path}", "{path: {regex: '.+'}}", "p:a:b:c", True),  # a regex may span segments
    ("{{{tag}}}:x", "", "{user1}:x", True),  # literal braces: a cluster hash tag
    ("{{{tag}}}:x", "", "user1:x", False),
    ("item:{id}-{part}", "{id: digits}", "item:12-3-4", True),
    ("item:{id}-{part}", "{id: digits}", "item:12", False),
    ("用户:{id}", "{id: digits}", "用户:7", True),
    ("b:{id}", "", b"b:\xff\xfe", True),  # any bytes but the delimiter
]


@pytest.mark.parametrize("pattern,placeholders,key,matches", MATCHES)
def test_match(pattern, placeholders, key, matches):
    schema = f'- key: "{pattern}"\n  type: string\n' + (f"  placeholders: {placeholders}\n" if placeholders else "")
    policy = load_policy_text(policy_text(schema))
    data = key if isinstance(key, bytes) else key.encode()
    found = policy.schema.match(data)
    assert (found is not None) == matches
    assert policy.schema.match(data) is found  # the cached answer is the same
    if matches:
        assert found.pattern == pattern
    strict = rejected_by(Engine(policy, TABLE), [b"GET", data])
    assert strict == (None if matches else "K10")


def test_public_interface():
    schema = load_policy_text(policy_text(BOOKS)).schema
    book = schema.match(b"book:42")
    assert (book.pattern, book.type, book.description, book.owner) == ("book:{id}", "hash", "one book", "catalog")
    assert book.relationships == ("books:genre:{genre}", "books:sales-rank")
    assert (book.ttl, book.max_bytes, book.max_elements) == (None, None, None)
    rank = schema.match(b"books:sales-rank")
    assert rank.type == "zset" and rank.owner is None and rank.relationships == ("every book key, by copies sold",)
    assert schema.match(b"global:film").type == "string"
    assert schema.match(b"global:music") is None
    assert schema.match(b"books:genre:sci-fiction").pattern == "books:genre:{genre}"
    assert [p.pattern for p in schema] == ["book:{id}", "books:genre:{genre}", "books:sales-rank", "global:{entity}"]


def test_one_pattern_per_key_with_many_patterns():
    """Fifty patterns in one regex: each key finds its own, whichever comes first in the file."""
    schema = "".join(f'- key: "app{i}:{{id}}:item{i}"\n  type: {TYPES[i % len(TYPES)]}\n' for i in range(50))
    policy = load_policy_text(policy_text(schema))
    for i in (0, 17, 49):
        assert policy.schema.match(f"app{i}:x:item{i}".encode()).type == TYPES[i % len(TYPES)]
    assert policy.schema.match(b"app1:x:item2") is None


# -- K10: strict keys --------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    "GET nobody:1", "SET nobody:1 v", "DEL nobody:1", "EXISTS book:1 nobody:1", "WATCH nobody:1",
    "EVAL return 1 1 nobody:1", "RENAME book:1 nobody:1", "TYPE nobody:1", "HSET book:x f v",
])
def test_strict_rejects_undeclared_keys_on_every_command_with_keys(command):
    assert rejected_by(engine(BOOKS), command) == "K10"
    assert rejected_by(engine(BOOKS, "K10: {strict: false}"), command) is None


def test_commands_without_keys_are_not_checked():
    for command in ("PING", "SCAN 0 MATCH book:*", "DBSIZE", "INFO"):
        assert rejected_by(engine(BOOKS), command) is None


def test_unknown_key_advice_names_the_closest_pattern():
    verdict = decide(engine(BOOKS), "HSET book:foundation title x")
    assert violation_text(verdict.reject) == (
        "NOPERM key 'book:foundation' breaks rule K10 (key schema): no pattern of the key schema matches it; "
        "the closest is 'book:{id}' (hash), but {id} must be digits, not 'foundation': name it after a declared "
        "pattern, or declare it under 'schema:'")
    advice = decide(engine(BOOKS), "INCR global:music").reject.advice
    assert "'global:{entity}' (string), but {entity} must be one of book, film, not 'music'" in advice
    advice = decide(engine(BOOKS), "SADD bookz:genre:x y").reject.advice
    assert "the closest is 'books:genre:{genre}' (set):" in advice
    long_key = "x" * 1000
    assert "name it after a declared pattern" in decide(engine(BOOKS), f"GET {long_key}").reject.advice


def test_audit_mode_forwards_and_reports():
    eng = engine(BOOKS, "K10: {mode: audit}")
    for command in ("GET nobody:1", "SET book:1 v"):
        verdict = decide(eng, command)
        assert verdict.reject is None and [f.rule for f in verdict.findings] == ["K10"]
        assert verdict.findings[0].mode == AUDIT
    verdict = decide(engine(BOOKS, mode="audit"), "SET book:1 v")
    assert verdict.reject is None and verdict.findings[0].mode == AUDIT
    assert decide(engine(BOOKS), "SET book:1 v").reject.mode == ENFORCE


# -- K10: type families over the command table --------------------------------------------------

PER_TYPE = "".join(f'- key: "{kind}:{{id}}"\n  type: {kind}\n' for kind in TYPES)
SETS_READ_AS_ZSETS = {"zunion", "zinter", "zdiff", "zintercard"}


def _shapes(spec, key: bytes):
    """Calls of the command whose every key is `key` (one shape finds the keys of each command)."""
    name = [part.encode() for part in spec.name.split("|")]
    yield [*name, *[key] * 6]
    yield [*name, b"1", *[key] * 6]
    yield [*name, key, b"1", *[key] * 6]
    yield [*name, b"STREAMS", key, b"0"]
    yield [*name, b"GROUP", b"g", b"c", b"STREAMS", key, b"0"]


def _typed_call(spec, key: bytes):
    for args in _shapes(spec, key):
        keys = find_keys(spec, args)
        if keys and all(args[index] == key for index, _ in keys):
            return args
    return None


TYPED_SPECS = [spec for spec in TABLE.walk() if spec.has_keys and spec.group in GROUP_TYPES]


def test_every_typed_command_is_covered():
    missing = [spec.name for spec in TYPED_SPECS if _typed_call(spec, b"hash:1") is None]
    assert missing == []


@pytest.mark.parametrize("spec", TYPED_SPECS, ids=lambda spec: spec.name)
def test_type_family_per_command(spec):
    """Each command of a typed group on a key of each type: rejected exactly when the types differ."""
    eng = engine(PER_TYPE, "K10: {strict: true}\nC2: off")  # PFDEBUG is @admin: the baseline denies it
    family = GROUP_TYPES[spec.group]
    allowed = {family} | ({"set"} if spec.name in SETS_READ_AS_ZSETS else set())
    for kind in TYPES:
        args = _typed_call(spec, f"{kind}:1".encode())
        verdict = decide(eng, args)
        rule = verdict.reject.rule if verdict is not None and verdict.reject is not None else None
        assert rule == (None if kind in allowed else "K10"), (spec.name, kind, verdict and verdict.reject)
        if rule:
            assert f"is a {family} command but the schema declares '{kind}:{{id}}' a {kind}" in verdict.reject.advice


GENERIC = [spec for spec in TABLE.walk() if spec.has_keys and spec.group not in GROUP_TYPES
           and spec.name not in ("sort", "sort_ro", "copy", "rename", "renamenx")]


@pytest.mark.parametrize("spec", GENERIC, ids=lambda spec: spec.name)
def test_generic_commands_are_type_neutral(spec):
    eng = engine(PER_TYPE, "K10: {strict: true}\nC2: off")  # MOVE, RESTORE...: the baseline denies them
    for kind in TYPES:
        args = _typed_call(spec, f"{kind}:1".encode())
        if args is not None:
            assert rejected_by(eng, args) is None, (spec.name, kind)


@pytest.mark.parametrize("command,rule", [
    ("SORT list:1", None), ("SORT set:1", None), ("SORT zset:1 BY nosort", None), ("SORT hash:1", "K10"),
    ("SORT_RO string:1", "K10"), ("SORT list:1 STORE list:2", None), ("SORT set:1 STORE set:2", "K10"),
    ("RENAME hash:1 hash:2", None), ("RENAME hash:1 zset:2", "K10"), ("RENAMENX set:1 list:2", "K10"),
    ("COPY string:1 string:2", None), ("COPY string:1 stream:2", "K10"),
    ("ZUNIONSTORE zset:1 2 set:1 zset:2", None), ("ZUNIONSTORE set:1 2 set:1 zset:2", "K10"),
    ("ZINTERSTORE zset:1 2 hash:1 zset:2", "K10"), ("SINTERSTORE set:1 set:2 zset:1", "K10"),
    ("GEOADD zset:1 13.4 52.5 berlin", None), ("PFADD string:1 a", None), ("SETBIT string:1 7 1", None),
    ("LMOVE list:1 list:2 LEFT RIGHT", None), ("LMOVE list:1 set:2 LEFT RIGHT", "K10"),
    ("XADD stream:1 * f v", None), ("XREAD STREAMS stream:1 list:1 0 0", "K10"),
])
def test_type_family_cases(command, rule):
    assert rejected_by(engine(PER_TYPE, "K10: {strict: true}"), command) == rule


def test_rename_to_an_undeclared_key_when_not_strict():
    assert rejected_by(engine(PER_TYPE, "K10: {strict: false}"), "RENAME hash:1 elsewhere") is None
    assert rejected_by(engine(PER_TYPE, "K10: {strict: true}"), "RENAME hash:1 elsewhere") == "K10"


def test_type_advice():
    verdict = decide(engine(BOOKS), "SET book:1 v")
    assert violation_text(verdict.reject) == (
        "NOPERM key 'book:1' breaks rule K10 (key schema): SET is a string command but the schema declares "
        "'book:{id}' a hash: use hash commands on it, or name the key after a string pattern")
    advice = decide(engine(BOOKS), "RENAME book:1 books:sales-rank").reject.advice
    assert advice == ("RENAME would move the hash of 'book:{id}' to a key the schema declares a zset "
                      "('books:sales-rank'): copy or rename it to a hash pattern")


def test_transactions_check_queued_commands():
    eng = engine(BOOKS)
    state = SessionState()
    state.in_multi = True
    args = as_args("SADD book:1 x")
    assert eng.decide(eng.plan_for(args), args, (), state).reject.rule == "K10"


# -- per-pattern TTL rule (T1, T3) ------------------------------------------------------------

TTLS = """
- key: "config:{name}"
  type: string
  ttl: none
- key: "session:{id}"
  type: string
  ttl: {min: 60, max: 3600}
- key: "cache:{id}"
  type: string
  ttl: required
- key: "other:{id}"
  type: string
"""


@pytest.mark.parametrize("command,rule,then", [
    ("SET config:a v", None, ()),  # ttl: none exempts from T1
    ("PERSIST config:a", None, ()),  # and from T3's PERSIST
    ("SET session:1 v", "T1", ()),
    ("SET session:1 v EX 30", "T3", ()),  # below the pattern's min
    ("SET session:1 v EX 7200", "T3", ()),  # above the pattern's max, below T3's own
    ("SET session:1 v EX 600", None, ()),
    ("SET cache:1 v", "T1", ()),  # required wins over T1's persistent glob cache:*
    ("HSET other:1 f v", "K10", ()),  # a string pattern
    ("SET other:1 v EX 86400", None, ()),  # T3's own bounds
    ("SET other:1 v", "T1", ()),
    ("SET cache:1 v", None, ("EXPIRE cache:1 60",)),
])
def test_ttl_per_pattern(command, rule, then):
    eng = engine(TTLS, "K10: {}\nT1: {persistent: ['cache:*']}\nT3: {min_ttl: 10, max_ttl: 2592000}")
    assert rejected_by(eng, command, then) == rule


def test_ttl_bound_advice_names_the_pattern():
    eng = engine(TTLS, "K10: {}\nT1: {}\nT3: {}")
    advice = decide(eng, "SET session:1 v EX 30").reject.advice
    assert advice == "use a TTL between 1 min and 1 h (schema pattern 'session:{id}') (got 30 s)"


def test_injected_ttl_within_the_pattern_bounds():
    eng = engine(TTLS, "K10: {}\nT1: {action: inject, default_ttl: 86400}\nT3: {}")
    assert decide(eng, "SET session:1 v").commands == [as_args("SET session:1 v EX 3600")]
    assert decide(eng, "SET cache:1 v").commands == [as_args("SET cache:1 v EX 86400")]
    assert decide(eng, "SET config:a v") is None
    assert decide(eng, "INCR session:2").commands[1] == as_args("EXPIRE session:2 3600 NX")


# -- per-pattern limits (V1, V2) ----------------------------------------------------------------

LIMITS = """
- key: "tiny:{id}"
  type: string
  limits: {max_bytes: 8}
- key: "big:{id}"
  type: string
  limits: {max_bytes: 100}
- key: "tags:{id}"
  type: set
  limits: {max_elements: 3}
- key: "list:{id}"
  type: list
"""
LIMIT_RULES = "K10: {}\nV1: {max_bytes: 16}\nV2: {max_elements: 10}"


@pytest.mark.parametrize("command,rule", [
    ("SET tiny:1 12345678", None),
    ("SET tiny:1 123456789", "V1"),
    ("SET big:1 " + "x" * 100, None),  # over V1's 16, within the pattern's 100
    ("SET big:1 " + "x" * 101, "V1"),
    ("MSET big:1 " + "x" * 50 + " tiny:1 123456789", "V1"),
    ("MSET big:1 " + "x" * 50 + " tiny:1 1234", None),
    ("SETRANGE tiny:1 5 abcd", "V1"),
    ("SADD tags:1 a b c d", None),  # members may exist: the script counts
    ("RPUSH list:1 " + " ".join("x" * 11), "V2"),  # more items than V2's own cap
])
def test_limits_per_pattern(command, rule):
    assert rejected_by(engine(LIMITS, LIMIT_RULES), command) == rule


def test_limit_advice_and_scripts_carry_the_pattern_limit():
    eng = engine(LIMITS, LIMIT_RULES)
    assert decide(eng, "SET tiny:1 123456789").reject.advice == \
        "keep string values at most 8 bytes (schema pattern 'tiny:{id}') (got 9 bytes)"
    script = decide(eng, "APPEND tiny:1 xy").commands[0]
    assert script[4] == b"8" and b"schema pattern 'tiny:{id}'" in script[5]
    script = decide(eng, "SADD tags:1 a b").commands[0]
    assert script[0] == b"EVAL" and script[5] == b"3" and b"keep sets at most 3 elements (schema pattern" in script[8]
    script = decide(eng, "RPUSH list:1 a").commands[0]
    assert script[5] == b"10"


# -- documentation ------------------------------------------------------------------------------

def test_markdown_table():
    policy = load_policy_text(policy_text(BOOKS + '- key: "x:{id}"\n  type: string\n  description: "a | b"\n'))
    text = markdown(policy, "p.yaml", policy.rule("K10"))
    lines = text.splitlines()
    assert lines[0] == "# Key schema: t"
    assert "Generated by `redis-guard schema docs p.yaml`" in lines[2] and "keys matching no pattern are rejected" in lines[2]
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == "| " + " | ".join(COLUMNS) + " |"
    assert table[1] == "|---|---|---|---|---|---|---|"
    assert table[2] == ("| `book:{id}` (id: digits) | hash | — | — | catalog | one book | "
                        "`books:genre:{genre}`, `books:sales-rank` |")
    assert table[4] == "| `books:sales-rank` | zset | — | — | — | — | every book key, by copies sold |"
    assert table[5].startswith("| `global:{entity}` (entity: one of book, film) | string |")
    assert table[6] == "| `x:{id}` | string | — | — | — | a \\| b | — |"
    assert len(table) == 2 + len(policy.schema)
    for row in table:
        assert len(re.findall(r"(?<!\\)\|", row)) == len(COLUMNS) + 1


def test_markdown_ttl_and_limits_cells():
    schema = TTLS + '- key: "tags:{id}"\n  type: set\n  limits: {max_elements: 3}\n'
    policy = load_policy_text(policy_text(schema, "T1: {}\nT3: {}\nV2: {}"))
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in markdown(policy).splitlines()
            if line.startswith("| `")}
    assert rows["`config:{name}`"][2] == "none (persistent)"
    assert rows["`session:{id}`"][2] == "required, 1 min to 1 h"
    assert rows["`cache:{id}`"][2] == "required"
    assert rows["`tags:{id}`"][3] == "at most 3 elements"
    assert "Enforced by rule K10" not in markdown(load_policy_text("name: d\nschema:\n" + textwrap.indent(BOOKS, "  ")))


def test_cli_schema_docs(capsys):
    assert cli.main(["schema", "docs", PRESET]) == 0
    out = capsys.readouterr().out
    assert out == markdown(load_policy_text(open(PRESET).read(), PRESET), PRESET,
                           load_policy_text(open(PRESET).read()).rule("K10"))
    for name in ("`book:{id}` (id: digits) | hash", "`books:genre:{genre}` (genre: slug) | set",
                 "`books:sales-rank` | zset", "`film:{id}` (id: digits) | hash", "`all:sales-rank` | zset"):
        assert name in out


def test_cli_schema_docs_errors(tmp_path, capsys):
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: plain\nrules:\n  C1: {}\n")
    assert cli.main(["schema", "docs", str(plain)]) == 1
    assert "no 'schema:' section" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nschema:\n  - key: a\n    type: nope\n")
    assert cli.main(["schema", "docs", str(bad)]) == 1
    assert f"{bad}:4:" in capsys.readouterr().err


def test_cli_policy_check_and_explain_show_the_schema(capsys):
    assert cli.main(["policy", "check", PRESET]) == 0
    out = capsys.readouterr().out
    assert "K10  enforce  key schema: 11 key patterns" in out
    assert "  schema: 11 key patterns (enforced by K10)" in out
    assert "    book:{id}  hash; id: digits" in out
    assert cli.main(["policy", "explain", PRESET, "--", "RENAME", "book:1", "nobody"]) == 1  # rejected
    out = capsys.readouterr().out
    assert "key 'book:1': schema pattern 'book:{id}' (hash)" in out
    assert "key 'nobody': no schema pattern" in out
    assert "decision: rejected" in out and "rule K10" in out


def test_docs_example_loads():
    """The example of docs/policy.md's "Key schema" section is a valid policy."""
    with open(DOCS, encoding="utf-8") as handle:
        section = handle.read().split("## Key schema", 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.S)[1]
    policy = load_policy_text("name: example\n" + example)
    assert policy.schema.match(b"book:1").max_elements == 100
    assert policy.schema.match(b"books:genre:mystery").type == "set"
    data = yaml.safe_load(example)
    assert len(policy.schema) == len(data["schema"])
