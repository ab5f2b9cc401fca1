"""The key-name rules K1, K2, K3, K4, K5, K8, K9, K11: no server needed.

Every key goes through both paths and they must agree:

* the engine: one combined match of every rule's `pattern` (compiled as bytes), and only when it
  fails, each rule's `check_key`; `decide` returns None (forwarded) or a verdict whose `reject`
  names the first rule that fired and whose `findings` name them all;
* each rule on its own: its `pattern` alone, and its `check_key` (None exactly when the pattern
  matches).

The seed tables use, per convention document (docs/conventions.md), a policy of the key rules
that document implies and the document's own good and bad example keys.
"""

from __future__ import annotations

import random
import re
import textwrap
import time

import pytest

from proxy.commands.table import CommandTable
from proxy.policy.base import KeyRule, PolicyError
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from tests.policy.helpers import load_error, no_baseline

TABLE = CommandTable.from_snapshot()
_CACHE: dict[str, tuple] = {}


def build(rules: str):
    """(policy, engine) for a `rules:` block (YAML, unindented)."""
    if rules not in _CACHE:
        policy = load_policy_text(no_baseline("name: test\nrules:\n" + textwrap.indent(textwrap.dedent(rules), "  ")))
        _CACHE[rules] = (policy, Engine(policy, TABLE))
    return _CACHE[rules]


def as_bytes(key) -> bytes:
    return key if isinstance(key, bytes) else key.encode("utf-8")


def fired(rules: str, key) -> list[str]:
    """The ids of the rules a key breaks, after checking that both paths agree."""
    policy, engine = build(rules)
    data = as_bytes(key)
    text = data.decode("utf-8", "backslashreplace")  # what the engine hands check_key
    direct = []
    for rule in policy.rules:
        if not isinstance(rule, KeyRule):
            continue
        finding = rule.check_key(text)
        alone = re.fullmatch(rule.pattern.encode(), data, re.S) is not None if rule.pattern else True
        assert alone == (finding is None), (rule.id, key, rule.pattern, finding)
        if finding is not None:
            assert finding.rule == rule.id and finding.subject.startswith("key '") and finding.advice
            assert "\n" not in finding.advice and "\n" not in finding.subject
            direct.append(rule.id)
    args = [b"SET", data, b"v"]
    plan = engine.plan_for(args)  # None: nothing to check for SET, forwarded as it is
    verdict = engine.decide(plan, args) if plan is not None else None
    if not direct:
        assert verdict is None, (key, verdict.reject)
    else:
        assert verdict is not None and verdict.reject is not None, key
        assert verdict.reject.rule == direct[0]
        assert [finding.rule for finding in verdict.findings] == direct
    return direct


def advice(rules: str, key) -> str:
    policy, _ = build(rules)
    text = as_bytes(key).decode("utf-8", "backslashreplace")
    found = [f for f in (r.check_key(text) for r in policy.rules if isinstance(r, KeyRule)) if f]
    assert len(found) == 1, found
    return found[0].advice


# -- the seeds -------------------------------------------------------------------------------

SEED_RULES = {
    # 000: lower case, ':' levels, '_' inside words, date:/ts: tags, no usr/prf, 128 characters;
    # its longest recommended key (session:token:uid:abc123:ts:1692806400) has 6 segments
    "000": """
        K1: {delimiter: ":", min_segments: 1, max_segments: 6}
        K2: {style: lowercase}
        K3: {charset: "a-z0-9:_"}
        K4: {min_length: 1, max_length: 128}
        K5: {joiner: "_"}
        K8: {timestamps: tagged}
        K9: {banned_words: [usr, prf], run_together: true}
    """,
    # 001: business:module:entity:id (at least two levels), no timestamps in keys
    "001": """
        K1: {min_segments: 2, max_segments: 8}
        K4: {max_length: 128}
        K8: {timestamps: forbid}
    """,
    # 002: camelCase project-wide (all-caps segments such as PRO:USER:UID:18 read as constants
    # and pass), a namespace segment first, no spaces/newlines/quotes/escapes, hash tags allowed
    "002": """
        K1: {min_segments: 2, max_segments: 8}
        K2: {style: camelCase}
        K3: {charset: "A-Za-z0-9:_.{}-"}
        K4: {min_length: 1, max_length: 128}
        K11: {hash_tags: allow}
    """,
    # 003: starts with a letter, only a-z 0-9 . :, '.' between words, module:meaning:...:type
    "003": """
        K1: {min_segments: 3, max_segments: 8}
        K2: {style: lowercase}
        K3: {charset: "a-z0-9.:", first: letter}
        K4: {max_length: 128}
        K5: {joiner: "."}
    """,
    # 004: lower-case nouns, ':' between levels, '-' between words
    "004": """
        K1: {min_segments: 2, max_segments: 8}
        K2: {style: lowercase}
        K3: {charset: "a-z0-9:._-", first: letter}
        K5: {joiner: "-"}
    """,
    # 004 also allows '/' or '.' as the delimiter, used consistently
    "004/": """
        K1: {delimiter: "/", min_segments: 2}
        K3: {charset: "a-z0-9/-", first: letter}
        K5: {joiner: "-", delimiter: "/"}
    """,
    "004.": """
        K1: {delimiter: ".", min_segments: 2}
        K3: {charset: "a-z0-9.-", first: letter}
        K5: {joiner: "-", delimiter: "."}
    """,
}

GOOD = {
    "000": ["user:profile:id:12345", "order:status:order_id:98765", "product:inventory:item_id:67890",
            "chat:messages:list:room_id:56789", "user:profile:hash:id:12345",
            "product:categories:set:item_id:67890", "leaderboard:score:zset:game_id:11111",
            "order:summary:date:20241122", "session:token:uid:abc123:ts:1692806400",
            "user:session:uid:abc123", "leaderboard:score:zset:game_id:1"],
    "001": ["users:profile:1000", "app:users:1000:profile", "o:2024:1001", "order:2024:1001",
            "weibo:timeline", "user:1000:liked_articles", "user:1000:carts:0", "user:1000:carts:1",
            "users:1000"],
    "002": ["PRO:USER:UID:18", "userAdmin:user:id:18", "project:user:userid:16",
            "{userAdmin}:user:id:18", "userAdmin:{user1000}.following", "userAdmin:user:USER_ID:16"],
    "003": ["user:basic.info:123:string", "user:basic.info:1001:hash", "order:detail.list:9:list"],
    "004": ["book:1", "book:2", "books:genre:sci-fiction", "books:sales-rank", "all:sales-rank", "global:book",
            "books:genre:popular-fiction", "books:format:ebook", "film:1", "films:genre:comedy",
            "films:format:bluray", "films:sales-rank", "books:genres"],
    "004/": ["book/1", "books/genre/sci-fiction", "books/sales-rank"],
    "004.": ["book.1", "books.genre.sci-fiction", "books.sales-rank"],
}

BAD = {
    "000": [
        ("usr:prf:id:12345", ["K9"]),  # vague abbreviations
        ("orderStatusOrderId98765", ["K2", "K3", "K9"]),  # camelCase run together with an id
        ("user:profile:personal:information:unique:identifier:12345", ["K1"]),  # 7 levels
        ("order:summary:20241122", ["K8"]),  # a date without its date: tag
        ("session:token:uid:abc123:1692806400", ["K8"]),  # an epoch without its ts: tag
        ("order:summary:date:2024-11-22", ["K3", "K5", "K8"]),
        ("order:status:order__id:1", ["K5"]),
        ("user:Profile:1", ["K2", "K3"]),
        ("user profile:1", ["K3"]),
        ("user:profile:id:", ["K1"]),
        ("user:profile:" + "x" * 120, ["K4"]),
    ],
    "001": [
        ("users:profile:1000:1692806400", ["K8"]),  # users:profile:${currentUserId}:${timestamp}
        ("users:profile:1000:1692806400123", ["K8"]),
        ("report:daily:2024-11-22", ["K8"]),
        ("report:daily:20241122", ["K8"]),
        ("user1000profile", ["K1"]),  # one run-together level
        ("super_califragilisticexpialidocious_user_profile_key_1000", ["K1"]),
        ("leaderboard", ["K1"]),  # the seed's ZADD example has a single level: not with min 2
    ],
    "002": [
        ("user admin:1", ["K3"]),
        ('user"admin":1', ["K3"]),
        ("user'admin':1", ["K3"]),
        ("user\nadmin:1", ["K3"]),
        ("user\tadmin:1", ["K3"]),
        ("user\\admin:1", ["K3"]),
        ("UserAdmin:user:id:18", ["K2"]),  # PascalCase in a camelCase project
        ("user_admin:user:id:18", ["K2"]),  # snake_case in a camelCase project
        ("userAdmin:foo{}{bar}", ["K11"]),
        ("userAdmin:foo{{bar}}zap", ["K11"]),
        ("{user1000}.following", ["K1"]),  # the seed's tag example has no namespace segment
        ("用户:资料:1", ["K3"]),
    ],
    "003": [
        ("user_basic:1:string", ["K3", "K5"]),  # underscore forbidden
        ("1user:x:string", ["K3"]),  # must start with a letter
        ("User:basic.info:1:string", ["K2", "K3"]),
        ("user:basic..info:1:string", ["K5"]),
        ("user:basic.info:{userid}:string", ["K3"]),  # the placeholder, taken literally
        ("user:basic info:1:string", ["K3"]),
        ("user:basic-info:1:string", ["K3", "K5"]),
        ("user:string", ["K1"]),
    ],
    "004": [
        ("books:sales_rank", ["K5"]),
        ("Book:1", ["K2", "K3"]),
        ("book", ["K1"]),
        ("books:genre:sci--fiction", ["K5"]),
        ("books::genre", ["K1"]),
        ("1book:x", ["K3"]),
    ],
    "004/": [
        ("books:genre", ["K1", "K3"]),
        ("book//1", ["K1"]),
        ("books/sales_rank", ["K3", "K5"]),
    ],
    "004.": [
        ("book..1", ["K1"]),
        ("books.sales_rank", ["K3", "K5"]),
        ("book:1", ["K1", "K3"]),
    ],
}


@pytest.mark.parametrize("seed,key", [(seed, key) for seed, keys in GOOD.items() for key in keys])
def test_seed_good_keys_pass(seed, key):
    assert fired(SEED_RULES[seed], key) == []


@pytest.mark.parametrize("seed,key,rules", [(seed, key, rules) for seed, rows in BAD.items() for key, rules in rows])
def test_seed_bad_keys_fail(seed, key, rules):
    assert fired(SEED_RULES[seed], key) == rules


def test_seed_000_advice():
    rules = SEED_RULES["000"]
    policy, engine = build(rules)
    args = [b"SET", b"usr:prf:id:12345", b"v"]
    assert engine.decide(engine.plan_for(args), args).reject.advice == "spell out 'usr' (a banned abbreviation)"
    k9 = policy.rule("K9")
    assert k9.check_key("orderStatusOrderId98765").advice == \
        "split 'orderStatusOrderId98765' into segments: use 'order:status:order:id:98765'"
    assert policy.rule("K1").check_key("user:profile:personal:information:unique:identifier:12345").advice == \
        "use at most 6 segments separated by ':' (this one has 7)"
    assert policy.rule("K8").check_key("order:summary:20241122").advice == "tag dates as 'date:20241122'"
    assert policy.rule("K2").check_key("orderStatusOrderId98765").advice == "use 'orderstatusorderid98765'"


# -- K1 segments ------------------------------------------------------------------------------

K1 = "K1: {}"


@pytest.mark.parametrize("key,bad", [
    ("a", False), ("a:b", False), ("a:b:c:d:e:f:g:h", False), ("a:b:c:d:e:f:g:h:i", True),
    ("", True), (":a", True), ("a:", True), ("a::b", True), (":", True), ("a/b", False), ("a b", False),
    ("用户:资料", False), (b"\xff:\xfe", False),
])
def test_k1_defaults(key, bad):
    assert fired(K1, key) == (["K1"] if bad else [])


def test_k1_advice():
    assert advice("K1: {min_segments: 2, max_segments: 5}", "user") == \
        "use 2 to 5 segments separated by ':', e.g. 'module:entity:id' (this one has 1)"
    assert advice("K1: {min_segments: 2, max_segments: 5}", "a:b:c:d:e:f") == \
        "use 2 to 5 segments separated by ':' (this one has 6)"
    assert advice(K1, "user::1") == "no empty segments: use 'user:1'"
    assert advice(K1, "") == "use at most 8 segments separated by ':', e.g. 'module:entity:id'"
    assert advice("K1: {min_segments: 4, max_segments: 4}", "a:b") == \
        "use exactly 4 segments separated by ':', e.g. 'module:submodule:entity:id' (this one has 2)"
    assert advice("K1: {min_segments: 6, max_segments: 9}", "a") .startswith(
        "use 6 to 9 segments separated by ':', e.g. 'module:submodule:entity:part1:part2:id'")


@pytest.mark.parametrize("delimiter,good,bad", [
    ("/", ["book/1", "books/genre/sci-fiction", "a:b/c"], ["book//1", "/book", "book/"]),
    (".", ["book.1", "a:b.c"], ["book..1", ".book", "book."]),
])
def test_k1_delimiters(delimiter, good, bad):
    rules = f'K1: {{delimiter: "{delimiter}", min_segments: 2, max_segments: 3}}'
    for key in good:
        assert fired(rules, key) == [], key
    for key in bad:
        assert fired(rules, key) == ["K1"], key
    assert fired(rules, f"a{delimiter}b{delimiter}c{delimiter}d") == ["K1"]
    assert fired(rules, "plain") == ["K1"]


# -- K2 letter case ---------------------------------------------------------------------------

@pytest.mark.parametrize("style,good,bad", [
    ("lowercase", ["user:profile:1", "order_id", "用户:资料", "{user1000}.x", ""], ["User:1", "user:ID"]),
    ("camelCase", ["userAdmin:user:id:18", "PRO:USER:UID:18", "{userAdmin}:x", "USER_ID", "18", "用户:资料",
                   "user.info", "sci-fiction", "", "a::b"],
     ["UserAdmin:1", "user_admin", "userAdmin:User", "user_Admin"]),
    ("PascalCase", ["UserAdmin:User:Id:18", "PRO:USER", "{UserAdmin}", "18", "用户"],
     ["userAdmin", "User_admin", "User:id"]),
    ("UPPERCASE", ["PRO:USER:UID:18", "USER_ID", "用户"], ["PRO:user", "Pro"]),
    ("any", ["anyThing", "ANY", "x_Y"], []),
])
def test_k2_styles(style, good, bad):
    rules = f"K2: {{style: {style}}}"
    for key in good:
        assert fired(rules, key) == [], key
    for key in bad:
        assert fired(rules, key) == ["K2"], key


def test_k2_any_compiles_out():
    policy, engine = build("K2: {style: any}")
    assert policy.rule("K2").pattern == "" and engine.key_match is None


def test_k2_advice():
    assert advice("K2: {}", "User:Profile:1") == "use 'user:profile:1'"
    assert advice("K2: {}", "用户:Name") == "use '用户:name'"
    assert advice("K2: {style: camelCase}", "UserAdmin:user_name:ID:18") == "use 'userAdmin:userName:ID:18'"
    assert advice("K2: {style: PascalCase}", "userAdmin:x") == "use 'UserAdmin:X'"
    assert advice("K2: {style: UPPERCASE}", "pro:user") == "use 'PRO:USER'"


def test_k2_delimiter():
    rules = 'K2: {style: camelCase, delimiter: "/"}'
    assert fired(rules, "userAdmin/PRO/id") == []
    assert fired(rules, "userAdmin/Pro") == ["K2"]


# -- K3 characters ----------------------------------------------------------------------------

K3 = "K3: {}"


@pytest.mark.parametrize("key,bad", [
    ("user:profile.id_1-2", False), ("", False), ("User", True), ("a b", True), ("a\nb", True), ("a\x00b", True),
    ("a\x7fb", True), ('a"b', True), ("a'b", True), ("a{b}", True), ("用户", True), (b"\xff", True),
])
def test_k3_defaults(key, bad):
    assert fired(K3, key) == (["K3"] if bad else [])


def test_k3_always_errors_whatever_the_charset():
    rules = """K3: {charset: "a-z '\\"\\\\x00-\\\\x1f"}"""
    assert fired(rules, "ab") == []
    for key in ("a b", "a'b", 'a"b', "a\tb", "a\x01b"):
        assert fired(rules, key) == ["K3"], key


def test_k3_first():
    letter = "K3: {charset: \"a-z0-9.:\", first: letter}"
    assert fired(letter, "user:1") == []
    assert fired(letter, "1user") == ["K3"]
    assert fired(letter, ":user") == ["K3"]
    assert fired(letter, "") == []  # the empty key is K4's concern
    alnum = "K3: {first: alnum}"
    assert fired(alnum, "1user") == []
    assert fired(alnum, "_user") == ["K3"]


def test_k3_non_ascii_when_allowed():
    rules = 'K3: {charset: "a-z0-9:\\\\x80-\\\\xff"}'
    assert fired(rules, "用户:资料:1") == []
    assert fired(rules, "用户 资料") == ["K3"]


def test_k3_advice():
    assert advice(K3, "user name") == "no spaces (found one at index 4)"
    assert advice(K3, "user\nname") == "no control characters (found '\\n' at index 4)"
    assert advice(K3, 'user"name') == 'no quotes (found " at index 4)'
    assert advice(K3, "User") == "use only the characters [a-z0-9:._-] (found 'U' at index 0)"
    assert advice(K3, "用户") == "use only the characters [a-z0-9:._-] (found '用' at index 0)"
    assert advice('K3: {first: letter}', "1user") == "start with a letter (not '1')"
    policy, _ = build(K3)
    assert policy.rule("K3").check_key("x" * 500 + " ").subject.endswith("...'")


# -- K4 length --------------------------------------------------------------------------------

def test_k4_bytes():
    rules = "K4: {}"
    assert fired(rules, "") == ["K4"]
    assert fired(rules, "x") == []
    assert fired(rules, "x" * 128) == []
    assert fired(rules, "x" * 129) == ["K4"]
    assert fired(rules, "é" * 64) == []  # 128 bytes
    assert fired(rules, "é" * 65) == ["K4"]
    assert advice(rules, "x" * 140) == "at most 128 bytes (this one has 140)"
    assert advice(rules, "é" * 65) == "at most 128 bytes (this one has 130)"
    assert advice(rules, "") == "at least 1 byte (this one has 0)"
    assert advice("K4: {min_length: 4}", "ab") == "at least 4 bytes (this one has 2)"
    assert fired("K4: {min_length: 0, max_length: 3}", "") == []


# -- K5 word joiner ---------------------------------------------------------------------------

@pytest.mark.parametrize("joiner,good,bad", [
    ("_", ["order:status:order_id:98765", "a", "", "a::b", "{user1000}:x"],
     ["order.id", "order-id", "order__id", "_id", "id_", "a:_:b"]),
    (".", ["user:basic.info:1:string", "a.b.c"], ["user_basic", "basic-info", "basic..info", ".x"]),
    ("-", ["books:sales-rank", "books:genre:sci-fiction"], ["books:sales_rank", "sales.rank", "sci--fiction"]),
])
def test_k5_joiners(joiner, good, bad):
    rules = f'K5: {{joiner: "{joiner}"}}'
    for key in good:
        assert fired(rules, key) == [], key
    for key in bad:
        assert fired(rules, key) == ["K5"], key


def test_k5_delimiter_is_not_a_joiner():
    rules = 'K5: {joiner: "-", delimiter: "."}'
    assert fired(rules, "books.sales-rank") == []
    assert fired(rules, "books.sales_rank") == ["K5"]


def test_k5_advice():
    assert advice('K5: {joiner: "."}', "user:basic_info:1:string") == \
        "join words with '.', not '_': use 'user:basic.info:1:string'"
    assert advice("K5: {}", "order:order__id:1") == "put exactly one '_' between words: use 'order:order_id:1'"


# -- K8 timestamps ----------------------------------------------------------------------------

FORBID = "K8: {}"
TAGGED = "K8: {timestamps: tagged}"


@pytest.mark.parametrize("key,forbid,tagged", [
    ("user:profile:id:12345", [], []),
    ("order:2024:1001", [], []),
    ("id:12345678901", [], []),  # 11 digits
    ("id:123456789", [], []),  # 9 digits
    ("x20241122", [], []),  # not a word of its own
    ("report:20241322", [], []),  # month 13
    ("users:profile:1000:1692806400", ["K8"], ["K8"]),
    ("users:profile:1000:1692806400123", ["K8"], ["K8"]),
    ("report:20241122", ["K8"], ["K8"]),
    ("report:202411221530", ["K8"], ["K8"]),
    ("report:20241122153000", ["K8"], ["K8"]),
    ("report:2024-11-22", ["K8"], ["K8"]),
    ("report:2024_11_22", ["K8"], ["K8"]),
    ("report:2024-11-22T10:30:00", ["K8"], ["K8"]),
    ("report:summary_20241122", ["K8"], ["K8"]),
    ("order:summary:date:20241122", ["K8"], []),
    ("session:token:uid:abc123:ts:1692806400", ["K8"], []),
    ("session:ts:1692806400123", ["K8"], []),
    ("ORDER:DATE:20241122", ["K8"], []),
    ("order/date/20241122", ["K8"], []),
    ("order:update:20241122", ["K8"], ["K8"]),
    ("session:ts:20241122", ["K8"], ["K8"]),
    ("order:date:1692806400", ["K8"], ["K8"]),
    ("order:date:2024-11-22", ["K8"], ["K8"]),
    ("", [], []),
])
def test_k8(key, forbid, tagged):
    assert fired(FORBID, key) == forbid
    assert fired(TAGGED, key) == tagged


def test_k8_advice():
    assert advice(FORBID, "users:profile:1000:1692806400") == \
        "no times or dates in key names ('1692806400' looks like one): keep them in the value"
    assert advice(TAGGED, "session:1692806400") == "tag epoch times as 'ts:1692806400'"
    assert advice(TAGGED, "order:date:2024-11-22") == \
        "write times only as 'date:YYYYMMDD' or 'ts:<epoch>' (e.g. 'date:20241122', not '2024-11-22')"


# -- K9 words ---------------------------------------------------------------------------------

BANNED = "K9: {banned_words: [usr, prf, tmp_key]}"
RUN = "K9: {run_together: true}"


@pytest.mark.parametrize("key,bad", [
    ("usr:prf:id:12345", True), ("usr", True), ("user:usr_id", True), ("user:id.usr", True), ("usrProfile:1", True),
    ("myUsr:1", True), ("USR:1", True), ("Usr:1", True), ("usr1000", True), ("1000usr", True), ("{usr}", True),
    ("a:tmp_key", True), ("a:TMP_KEY:1", True),
    ("user:profile:id:12345", False), ("user:usrname", False), ("prfx", False), ("xprf", False), ("USRNAME", False),
    ("a:tmp", False), ("a:tmp_keys", False), ("", False),
])
def test_k9_banned_words(key, bad):
    assert fired(BANNED, key) == (["K9"] if bad else [])


@pytest.mark.parametrize("key,bad", [
    ("orderStatusOrderId98765", True), ("userId1", True), ("user:orderStatus98765:x", True),
    ("98765orderStatus", True), ("x_orderStatus1", True),
    ("abc123", False), ("5f3a9b2c", False), ("UID18", False), ("userAdmin:user:id:18", False),
    ("order:status:order_id:98765", False), ("user1000profile", False), ("orderStatus:98765", False), ("", False),
])
def test_k9_run_together(key, bad):
    assert fired(RUN, key) == (["K9"] if bad else [])


def test_k9_nothing_to_check_compiles_out():
    policy, engine = build("K9: {}")
    assert policy.rule("K9").pattern == "" and engine.key_match is None
    assert policy.rule("K9").check_key("usrPrfId98765") is None


def test_k9_both():
    rules = "K9: {banned_words: [usr], run_together: true}"
    assert fired(rules, "usr:1") == ["K9"]
    assert fired(rules, "orderId1") == ["K9"]
    assert fired(rules, "user:order_id:1") == []
    assert advice(rules, "userId1:usr") == "spell out 'usr' (a banned abbreviation)"


# -- K11 hash tags ----------------------------------------------------------------------------

@pytest.mark.parametrize("key,allow,require,forbid", [
    ("{user1000}.following", [], [], ["K11"]),
    ("{user1000}.followers", [], [], ["K11"]),
    ("user:{1000}:profile", [], [], ["K11"]),
    ("plain:key", [], ["K11"], []),
    ("", [], ["K11"], []),
    ("foo{}{bar}", ["K11"], ["K11"], ["K11"]),  # Redis hashes the whole key
    ("foo{{bar}}zap", ["K11"], ["K11"], ["K11"]),  # Redis hashes '{bar'
    ("foo{bar}{zap}", ["K11"], ["K11"], ["K11"]),  # the second pair does nothing
    ("{}", ["K11"], ["K11"], ["K11"]),
    ("a{b", ["K11"], ["K11"], ["K11"]),
    ("a}b", ["K11"], ["K11"], ["K11"]),
])
def test_k11(key, allow, require, forbid):
    assert fired("K11: {}", key) == allow
    assert fired("K11: {hash_tags: require}", key) == require
    assert fired("K11: {hash_tags: forbid}", key) == forbid


def test_k11_advice():
    assert advice("K11: {}", "foo{}{bar}") == \
        "use braces only for one non-empty tag such as '{user1000}' (Redis hashes the whole key here)"
    assert advice("K11: {}", "foo{{bar}}zap") == \
        "use braces only for one non-empty tag such as '{user1000}' (Redis hashes only '{bar' here)"
    assert advice("K11: {hash_tags: require}", "user:1000") == \
        "add one hash tag naming what the key is stored with, e.g. '{user1000}.following'"
    assert advice("K11: {hash_tags: forbid}", "{user1000}.x") == "no braces: this policy forbids hash tags"


# -- all rules together -----------------------------------------------------------------------

ALL = """
    K1: {min_segments: 1, max_segments: 6}
    K2: {style: camelCase}
    K3: {charset: "A-Za-z0-9:_.{}-"}
    K4: {max_length: 40}
    K5: {joiner: "."}
    K8: {timestamps: tagged}
    K9: {banned_words: [usr, prf], run_together: true}
    K11: {hash_tags: allow}
"""


@pytest.mark.parametrize("rules", [
    ALL, SEED_RULES["000"], SEED_RULES["003"], "K2: {style: PascalCase}\nK11: {hash_tags: require}",
    'K5: {joiner: "-"}\nK8: {}\nK1: {delimiter: "/", min_segments: 2, max_segments: 3}',
])
def test_random_keys_agree(rules):
    """Random keys over an alphabet that exercises every rule: both paths always agree."""
    alphabet = ["a", "b", "z", "A", "Z", "Id", "usr", "prf", "0", "1", "2024", "1122", "1692806400", "date", "ts",
                ":", ":", "/", ".", "_", "-", "{", "}", " ", "\n", '"', "é", "用"]
    rng = random.Random(7)
    for _ in range(1500):
        key = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        fired(rules, key)


def test_invalid_utf8_key_is_rejected_by_the_engine():
    _, engine = build(K3)
    args = [b"SET", b"ab\xffcd", b"v"]
    verdict = engine.decide(engine.plan_for(args), args)
    assert verdict.reject.rule == "K3"


@pytest.mark.serial  # measures time: alone, not beside parallel workers
@pytest.mark.parametrize("key", [
    b"1:" * 50000 + b"xY_", b"aB" * 300000 + b"1", b"abAb" * 150000, b"u" * 600000 + b"sr", b"2024" * 150000,
    b"{a}" * 200000, b"a" * 600000 + b"{", b"1692806400:" * 50000, b"a_" * 300000 + b"_",
])
def test_long_keys_take_linear_time(key):
    """No pattern backtracks: a 600 KB key costs milliseconds, not minutes (a client must not be
    able to stall the proxy with a crafted key)."""
    _, engine = build(ALL.replace("max_length: 40", "max_length: 1000000"))
    start = time.perf_counter()
    engine.key_match(key)
    for rule in engine.key_rules:
        re.fullmatch(rule.pattern.encode(), key, re.S)
    assert time.perf_counter() - start < 2.0


def test_patterns_are_ascii_and_describe():
    policy, _ = build(ALL)
    rules = [rule for rule in policy.rules if rule.id != "C2"]  # C2: off, the baseline's rule
    assert [rule.id for rule in rules] == ["K1", "K2", "K3", "K4", "K5", "K8", "K9", "K11"]
    for rule in rules:
        assert rule.pattern.isascii()
        assert rule.describe()
        assert rule.check_key("user:profile") is None


# -- settings errors --------------------------------------------------------------------------

ONE_CHARACTER = "'delimiter' must be one punctuation character such as ':', '/' or '.'"

@pytest.mark.parametrize("rules,line,message", [
    ("K1:\n  max_segments: many", 4, "rule K1: 'max_segments' must be a whole number, got 'many'"),
    ("K1:\n  min_segments: 0", 4, "rule K1: 'min_segments' must be at least 1, got 0"),
    ("K1:\n  min_segments: 4\n  max_segments: 2", 5, "rule K1: 'max_segments' (2) must be at least 'min_segments' (4)"),
    ("K1:\n  delimiter: '::'", 4, f"rule K1: {ONE_CHARACTER}, got '::'"),
    ("K1:\n  delimiter: a", 4, f"rule K1: {ONE_CHARACTER}, got 'a'"),
    ("K1:\n  segments: 3", 4, "rule K1: unknown setting(s): segments (did you mean min_segments?)"),
    ("K2:\n  style: snake_case", 4,
     "rule K2: 'style' must be one of lowercase, camelCase, PascalCase, UPPERCASE, any, got 'snake_case'"),
    ("K2:\n  delimiter: 3", 4, "rule K2: 'delimiter' must be a string, got 3"),
    ("K3:\n  charset: z-a", 4,
     "rule K3: 'charset' is not the body of a regex character class (bad character range z-a at position 1): 'z-a'"),
    ("K3:\n  charset: 中文", 4,
     "rule K3: 'charset' must be ASCII (write \\x80-\\xff to allow UTF-8 non-ASCII characters), got '中文'"),
    ("K3:\n  charset: ' '", 4, "rule K3: 'charset' allows no character a key may contain: ' '"),
    ("K3:\n  charset: [a-z]", 4, "rule K3: 'charset' must be a string, got ['a-z']"),
    ("K3:\n  first: digit", 4, "rule K3: 'first' must be one of any, letter, alnum, got 'digit'"),
    ("K4:\n  max_length: true", 4, "rule K4: 'max_length' must be a whole number, got True"),
    ("K4:\n  min_length: 20\n  max_length: 10", 5, "rule K4: 'max_length' (10) must be at least 'min_length' (20)"),
    ("K4:\n  max: 3", 4, "rule K4: unknown setting(s): max"),
    ("K5:\n  joiner: '+'", 4, "rule K5: 'joiner' must be one of _, ., -, got '+'"),
    ("K5:\n  joiner: '.'\n  delimiter: '.'", 4, "rule K5: 'joiner' must differ from the delimiter, got '.' for both"),
    ("K8:\n  timestamps: never", 4, "rule K8: 'timestamps' must be one of forbid, tagged, got 'never'"),
    ("K8:\n  tagged: true", 4, "rule K8: unknown setting(s): tagged"),
    ("K9:\n  banned_words: [usr, two words]", 4,
     "rule K9: banned word 'two words' must be ASCII letters and digits (optionally joined by '_', '.' or '-')"),
    ("K9:\n  banned_words: [usr, [x]]", 4, "rule K9: 'banned_words' must be a list of strings, got ['x']"),
    ("K9:\n  run_together: maybe", 4, "rule K9: 'run_together' must be true/false, got 'maybe'"),
    ("K11:\n  hash_tags: sometimes", 4, "rule K11: 'hash_tags' must be one of allow, require, forbid, got 'sometimes'"),
    ("K11:\n  mode: strict", 4, "rule K11: 'mode' must be one of enforce, audit, off, got 'strict'"),
])
def test_setting_errors(rules, line, message):
    error = load_error("name: test\nrules:\n" + textwrap.indent(rules, "  "), "test.yaml")
    assert error.message == message
    assert error.line == line
    assert str(error) == f"test.yaml:{line}: {message}"


def test_flow_mapping_errors_point_at_the_rule():
    text = "name: test\nrules:\n  K1: {min_segments: 2}\n  K4: {max_length: -1}\n"
    with pytest.raises(PolicyError) as error:
        load_policy_text(text)
    assert error.value.line == 4 and "'max_length' must be at least 1" in error.value.message


def test_off_and_audit_modes():
    # quoted: YAML 1.1 reads a bare `off` as false
    policy, engine = build('K1: "off"\nK4: {mode: audit}')
    assert engine.key_rules == [policy.rule("K4")]
    args = [b"SET", b"x" * 200, b"v"]
    verdict = engine.decide(engine.plan_for(args), args)
    assert verdict.reject is None and [f.rule for f in verdict.findings] == ["K4"]


@pytest.mark.parametrize("rules", [ALL, SEED_RULES["000"], 'K3: {charset: "a-z:\\\\x80-\\\\xff"}\nK4: {max_length: 6}'])
def test_invalid_utf8_keys_agree_when_decoded_with_surrogateescape(rules):
    """The engine hands check_key the key decoded with backslashreplace, which loses the bytes of
    invalid UTF-8; decoded with surrogateescape instead, the rules see the exact bytes and both
    paths agree on every key."""
    policy, _ = build(rules)
    rng = random.Random(11)
    for _ in range(500):
        data = bytes(rng.choice(b"ab:_.{}19 \xff\xe7\x94\xa8") for _ in range(rng.randrange(0, 10)))
        text = data.decode("utf-8", "surrogateescape")
        for rule in (rule for rule in policy.rules if rule.id != "C2"):
            finding = rule.check_key(text)
            assert (re.fullmatch(rule.pattern.encode(), data, re.S) is not None) == (finding is None), (rule.id, data)
            if finding is not None:
                (finding.subject + finding.advice).encode("utf-8")  # printable: no lone surrogates left
