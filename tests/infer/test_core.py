"""The sans-IO core of `policy infer`, without a server: segment classes, the delimiter, the
bounded trie, the decisions (type, TTL, sizes, rare patterns, naming rules), and that every draft
loads as a policy whose schema has no overlapping patterns."""

from __future__ import annotations

import random
import time
import uuid

import pytest

from proxy.infer.draft import build, fixtures, nice_above, nice_duration, outliers, render
from proxy.infer.model import KeyspaceModel
from proxy.infer.segments import Classifier, detect_delimiter
from proxy.policy.loader import load_policy_text

CLASSIFY = [
    (b"42", "digits"),
    (b"20240131", "digits"),
    (b"123e4567-e89b-12d3-a456-426614174000", "uuid"),
    (b"2024-01-31", "date"),
    (b"5d41402abc4b2a76b9719d911017c592", "hex"),
    (b"DEADBEEF01", "hex"),
    (b"deadbeef", None),  # a hex-looking word without a digit stays a word
    (b"jane.doe@example.com", "email"),
    (b"10.0.0.1", "ipv4"),
    (b"aZ09kLmNoPqRsTuVwX", "token"),
    (b"sales-rank", None),
    (b"userProfile", None),
    (b"abc123", None),  # short: a word until its siblings say otherwise
    (b"", None),
]


@pytest.mark.parametrize("segment, expected", CLASSIFY)
def test_classify(segment, expected):
    assert Classifier(":")(segment) == expected


@pytest.mark.parametrize("keys, expected", [
    ([b"a:b", b"a:c", b"x.y"], ":"),
    ([b"a.b.c", b"a.b", b"q:1"], "."),
    ([b"a/b/c", b"d/e"], "/"),
    ([b"plain", b"words"], ":"),
    ([b"a:b.c", b"d:e.f"], ":"),  # a tie goes to ':'
])
def test_detect_delimiter(keys, expected):
    assert detect_delimiter(keys) == expected


def _model(entries, delimiter=":", **kwargs):
    model = KeyspaceModel(delimiter, **kwargs)
    for key, kind, ttl, length in entries:
        model.add(key.encode() if isinstance(key, str) else key, kind, ttl, length)
    return model


def _texts(draft):
    return {p.text: p for p in draft.patterns}


def _loads(draft):
    policy = load_policy_text(render(draft))
    return policy


def test_variable_parts_become_placeholders():
    rng = random.Random(1)
    entries = [(f"user:{i}", "hash", -1, 5) for i in range(50)]
    entries += [(f"session:{uuid.UUID(int=rng.getrandbits(128))}", "string", 60_000, 30) for _ in range(40)]
    entries += [(f"stats:{2024}-{m:02d}-01:visits", "zset", -1, 10) for m in range(1, 13)]
    entries += [("user:count", "string", -1, 3)]
    draft = build(_model(entries))
    texts = _texts(draft)
    assert {"user:{id}", "session:{uuid}", "stats:{date}:visits", "user:count"} <= set(texts)
    assert texts["user:{id}"].type == "hash" and texts["user:{id}"].ttl == "none"
    assert texts["session:{uuid}"].ttl == "required" and texts["session:{uuid}"].max_ttl == 300
    policy = _loads(draft)
    assert policy.schema.match(b"user:7").pattern == "user:{id}"
    assert policy.schema.match(b"user:count").pattern == "user:count"
    assert policy.schema.match(b"user:alice") is None


def test_many_literals_collapse_into_one_bounded_position():
    words = [f"name{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(200)]
    entries = [(f"profile:{w}:card", "hash", -1, 4) for w in words] + [("profile:stats", "hash", -1, 4)]
    model = _model(entries)
    assert model.nodes < 10  # the 200 names are one wildcard node, not 200
    draft = build(model)
    texts = _texts(draft)
    assert "profile:{profile}:card" in texts and texts["profile:{profile}:card"].count == 200
    policy = _loads(draft)
    assert policy.schema.match(b"profile:newname:card") is not None


def test_wildcard_excludes_its_siblings():
    """A collapsed position next to a class and a literal: the schema must have no overlap (K10
    refuses one at load) and each key keeps its own pattern."""
    rng = random.Random(2)
    entries = [(f"t:{''.join(rng.choice('abcdefghij') for _ in range(6))}", "string", -1, 5) for _ in range(100)]
    entries += [(f"t:{i}", "hash", -1, 5) for i in range(20)]
    entries += [(f"t:{rng.getrandbits(64):x}a1b2c3d4e5f6g7h8", "list", -1, 5) for _ in range(20)]  # tokens
    draft = build(_model(entries))
    policy = _loads(draft)
    kinds = {policy.schema.match(key).type for key in (b"t:abcdef", b"t:12", b"t:ffffa1b2c3d4e5f6g7h8")}
    assert kinds == {"string", "hash", "list"}


def test_look_alike_siblings_merge_below_the_namespace_only():
    genres = ["scifi", "crime", "poetry", "drama"]
    entries = [(f"books:genre:{g}", "set", -1, 10) for g in genres]
    entries += [(f"{ns}:1", "hash", -1, 3) for ns in ("cart", "wish", "note", "mail")]
    draft = build(_model(entries))
    texts = _texts(draft)
    assert "books:genre:{genre}" in texts
    assert texts["books:genre:{genre}"].placeholders[0].constraint == {"enum": sorted(genres)}
    # namespaces stay apart even when their keys look alike
    assert {"cart:{id}", "wish:{id}", "note:{id}", "mail:{id}"} <= set(texts)


def test_siblings_of_different_types_stay_apart():
    entries = [("books:genres", "set", -1, 5), ("books:sales-rank", "zset", -1, 9), ("books:top", "list", -1, 3)]
    texts = _texts(build(_model(entries)))
    assert set(texts) == {"books:genres", "books:sales-rank", "books:top"}


OUTLIERS = [
    # (keys of the pattern, the outlier entries, what the outlier report says)
    ([("s:{}", "string", 60_000, 10)] * 1, [("s:999999", "hash", 60_000, 2)], "hash where the pattern holds string"),
    ([("s:{}", "string", 60_000, 10)], [("s:999998", "string", -1, 10)], "no TTL where"),
    ([("s:{}", "string", -1, 10)], [("s:999997", "string", -1, 100_000)], "over 20 bytes"),
    ([("s:{}", "string", -1, 10)], [("odd:1", "string", -1, 10), ("odd:2", "string", -1, 10)], "a rare pattern"),
]


@pytest.mark.parametrize("family, extra, said", OUTLIERS)
def test_outliers(family, extra, said):
    template, kind, ttl, length = family[0]
    entries = [(template.format(i), kind, ttl, length) for i in range(100)] + extra
    draft = build(_model(entries))
    found = outliers(draft)
    assert len(found) == 1 and said in found[0][0], found
    assert draft.outlier_keys == len(extra)
    assert draft.accepted == 100
    _loads(draft)
    text = fixtures(draft, "draft.yaml")
    assert "expect: {reject" in text


def test_mixed_ttl_practice_is_noted_not_enforced():
    entries = [(f"m:{i}", "string", 60_000 if i % 2 else -1, 3) for i in range(100)]
    draft = build(_model(entries))
    pattern = _texts(draft)["m:{id}"]
    assert pattern.ttl == "mixed" and pattern.without_ttl == 0
    assert "MIXED" in render(draft)


def test_few_keys_rare_unless_a_named_key():
    entries = [("a:1", "string", -1, 1), ("a:2", "string", -1, 1), ("counter:orders", "string", -1, 1)]
    draft = build(_model(entries), min_keys=3)
    texts = _texts(draft)
    assert not texts["a:{id}"].rule and texts["counter:orders"].rule


NAMING = [
    (["shop:userProfile:{}", "shop:orderItems:{}"], "camelCase", None),
    (["user:basic.info:{}:hash", "order:line.items:{}:list"], "lowercase", "."),
    (["order:order_status:{}", "user:profile:{}"], "lowercase", "_"),
    (["Shop:Cart:{}", "Shop:order_x:{}"], None, "_"),
]


@pytest.mark.parametrize("templates, style, joiner", NAMING)
def test_naming_rules_follow_the_keys(templates, style, joiner):
    entries = [(t.format(i), "hash", -1, 2) for t in templates for i in range(10)]
    draft = build(_model(entries))
    assert draft.naming.style == style
    assert draft.naming.joiner == joiner
    assert draft.naming.min_segments == min(t.count(":") + 1 for t in templates)
    policy = _loads(draft)
    for rule_id in ("K1", "K3", "K4"):
        rule = policy.rule(rule_id)
        for t in templates:  # every key the draft was drawn from passes its naming rules
            assert rule.check_key(t.format(3)) is None


@pytest.mark.parametrize("value, nice", [(1, 1), (3, 5), (11, 20), (120, 200), (500, 500), (501, 1000)])
def test_nice_above(value, nice):
    assert nice_above(value) == nice


@pytest.mark.parametrize("seconds, nice", [(1, 60), (61, 300), (3599, 3600), (3601, 7200), (10**8, 100051200)])
def test_nice_duration(seconds, nice):
    assert nice_duration(seconds) == nice


def test_memory_bounded_by_the_node_cap():
    rng = random.Random(3)
    model = KeyspaceModel(":", nodes_max=200)
    for _ in range(5000):  # random words at two levels: no cap would keep thousands of nodes
        a = "".join(rng.choice("abcdefgh") for _ in range(5))
        b = "".join(rng.choice("ijklmnop") for _ in range(5))
        model.add(f"{a}:{b}:x".encode(), "string", -1, 1)
    assert model.nodes <= 200
    assert model.root.size() == model.nodes
    draft = build(model)
    assert sum(p.count for p in draft.patterns) == 5000
    _loads(draft)


def test_linear_in_keys():
    def seconds(n):
        model = KeyspaceModel(":")
        keys = [(f"user:{i}:profile".encode(), f"s:{uuid.UUID(int=i)}".encode()) for i in range(n)]
        start = time.perf_counter()
        for a, b in keys:
            model.add(a, "hash", -1, 5)
            model.add(b, "string", 1000, 10)
        build(model)
        return time.perf_counter() - start

    small, large = seconds(5000), seconds(40000)
    assert large < small * 8 * 3  # 8 times the keys: generous bound for a shared CPU


def test_empty_keyspace():
    draft = build(KeyspaceModel())
    assert draft.keys == 0 and not draft.patterns
    assert "Outliers: none" in render(draft)
    assert load_policy_text(render(draft)).schema is None


def test_small_keyspace_held_until_finish():
    model = KeyspaceModel()
    for i in range(10):
        model.add(f"a.b.{i}".encode(), "string", -1, 1)
    draft = build(model)
    assert draft.delimiter == "." and _texts(draft).keys() == {"a.b.{id}"}


def test_empty_segments_leave_k1_out():
    entries = [(f"a::{i}", "string", -1, 1) for i in range(10)] + [(f"b:{i}:", "string", -1, 1) for i in range(10)]
    draft = build(_model(entries))
    policy = _loads(draft)
    assert policy.rule("K1") is None
    for key in ("a::3", "b:3:"):
        assert policy.schema.match(key.encode()) is not None


def test_merged_subtrees_keep_one_enum_per_position():
    entries = [(f"a:{x}:genre:{g}", "set", -1, 3) for x in ("xx", "yy", "zz") for g in ("drama", "poetry", "crime")]
    entries += [("a:ww:genre:drama", "set", -1, 3), ("a:ww:genre:opera", "set", -1, 3)]  # no enum below ww
    draft = build(_model(entries))
    policy = _loads(draft)  # no overlap
    assert [p.text for p in draft.rules if p.count > 1] == ["a:{a}:genre:{genre}"]
    assert policy.schema.match(b"a:yy:genre:crime") is not None


@pytest.mark.parametrize("seed", range(40))
def test_random_keyspaces_draft_a_valid_schema(seed):
    """Random trees of words, ids and tokens: the draft always loads (no overlapping patterns), and
    every key of a pattern kept as a rule matches that pattern."""
    rng = random.Random(seed)
    words = ["user", "cart", "genre", "drama", "poetry", "crime", "x", "yy", "zz", "a-b", "Top", "sales_rank"]

    def segment():
        roll = rng.random()
        if roll < 0.5:
            return rng.choice(words)
        if roll < 0.7:
            return str(rng.randint(0, 10**6))
        if roll < 0.8:
            return str(uuid.UUID(int=rng.getrandbits(128)))
        if roll < 0.9:
            return f"{rng.getrandbits(64):x}f1"
        return "".join(rng.choice("abcdefghijk") for _ in range(rng.randint(1, 6)))

    templates = [[segment() for _ in range(rng.randint(1, 4))] for _ in range(25)]
    entries, where = [], {}
    for template in templates:
        kind = rng.choice(["string", "hash", "set"])
        for _ in range(rng.randint(1, 40)):
            parts = [part if rng.random() < 0.7 else segment() for part in template]
            key = ":".join(parts)
            entries.append((key, kind, rng.choice([-1, 60_000]), rng.randint(1, 50)))
    draft = build(_model(entries))
    policy = _loads(draft)
    for p in draft.rules:
        for examples in p.leaf.type_examples.values():
            for key in examples:
                where[key] = p.text
    for key, text in where.items():
        found = policy.schema.match(key)
        assert found is not None and found.pattern == text, (key, text, found and found.pattern)
