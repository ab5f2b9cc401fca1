"""Keyspaces generated from each preset's convention (configs/policies/) and from the key-schema
example, with outliers mixed in: a wrong type under a pattern, a key without a TTL where all
have one, an unknown namespace, an over-size value. `populate` writes one into a Redis server and
returns the outlier keys: what `redis-guard audit --policy <draft>` must flag, and nothing else."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """`count` keys named `name(i, rng)`, of `type`, each of a size in `size`, TTL in `ttl` (None: none)."""

    name: object
    type: str
    count: int
    size: tuple[int, int] = (1, 5)
    ttl: tuple[int, int] | None = None


def _hex(rng, n=32):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _uuid(rng):
    return str(uuid.UUID(int=rng.getrandbits(128)))


def _token(rng, n=24):
    return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") for _ in range(n - 2)) + \
        str(rng.randint(10, 99))


GENRES = ["sci-fiction", "popular-fiction", "mystery", "technical", "romance", "history"]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
         "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform",
         "victor", "whiskey", "xray", "yankee", "zulu"]

KEYSPACES = {
    # seed 000: lower case, ':' levels, '_' inside words, type words, date:/ts: segments
    "lowercase-colon": [
        Family(lambda i, r: f"user:profile:hash:id:{i}", "hash", 300, (3, 8)),
        Family(lambda i, r: f"order:order_status:{i}", "string", 200, (5, 40), (600, 3600)),
        Family(lambda i, r: f"chat:messages:list:room_id:{i}", "list", 60, (1, 30), (3600, 86400)),
        Family(lambda i, r: f"stats:daily_visits:date:2024{1 + i // 28:02d}{1 + i % 28:02d}", "zset", 90, (10, 50)),
        Family(lambda i, r: "config:feature_flags", "hash", 1, (5, 5)),
    ],
    # seed 001: ':' hierarchy, TTLs on everything, strings <= 10 KB
    "key-value-design": [
        Family(lambda i, r: f"app:user:{i}:cart", "hash", 250, (1, 12), (1800, 7200)),
        Family(lambda i, r: f"app:product:{_hex(r, 24)}", "string", 250, (100, 2000), (3600, 86400)),
        Family(lambda i, r: f"app:session:{_uuid(r)}", "string", 150, (30, 60), (300, 1800)),
        Family(lambda i, r: f"app:leaderboard:{WORDS[i]}", "zset", 12, (20, 100), (86400, 172800)),
    ],
    # seed 002: project namespace first, camelCase segments
    "camelcase-namespace": [
        Family(lambda i, r: f"shop:userProfile:{i}", "hash", 200, (4, 9)),
        Family(lambda i, r: f"shop:orderItems:{_uuid(r)}", "list", 120, (1, 20), (3600, 7200)),
        Family(lambda i, r: f"shop:sessionToken:{_token(r)}", "string", 150, (32, 64), (900, 1800)),
        Family(lambda i, r: f"shop:productViews:{i}:daily", "zset", 80, (5, 40)),
    ],
    # seed 003: a-z0-9.: only, '.' joins words, the value type last, TTL mandatory
    "strict-dotted": [
        Family(lambda i, r: f"user:basic.info:{i}:hash", "hash", 250, (3, 10), (3600, 86400)),
        Family(lambda i, r: f"order:line.items:{i}:list", "list", 150, (1, 15), (600, 3600)),
        Family(lambda i, r: f"cache:page.html:{_hex(r, 40)}:string", "string", 150, (200, 5000), (60, 600)),
        Family(lambda i, r: f"tag:{WORDS[i]}.{WORDS[-1 - i]}:members:set", "set", 20, (2, 30), (86400, 86400 * 7)),
    ],
    # seed 004: the book/film key schema of "Mastering Redis"
    "key-schema": [
        Family(lambda i, r: f"book:{i + 1}", "hash", 300, (6, 9)),
        Family(lambda i, r: f"film:{i + 1}", "hash", 200, (6, 9)),
        Family(lambda i, r: f"books:genre:{GENRES[i]}", "set", 6, (10, 60)),
        Family(lambda i, r: f"films:genre:{GENRES[i]}", "set", 6, (10, 60)),
        Family(lambda i, r: f"books:format:{['ebook', 'paperback', 'hardcover'][i]}", "set", 3, (10, 60)),
        Family(lambda i, r: f"films:format:{['bluray', 'dvd', 'streaming'][i]}", "set", 3, (10, 60)),
        Family(lambda i, r: "books:sales-rank", "zset", 1, (300, 300)),
        Family(lambda i, r: "films:sales-rank", "zset", 1, (200, 200)),
        Family(lambda i, r: "all:sales-rank", "zset", 1, (500, 500)),
        Family(lambda i, r: "books:genres", "set", 1, (12, 12)),
        Family(lambda i, r: f"global:{['book', 'film'][i]}", "string", 2, (3, 3)),
    ],
    # the applications preset: one project namespace, services on their own prefixes
    "applications": [
        Family(lambda i, r: f"shop:checkout:cart:{i}", "hash", 200, (1, 10), (1800, 3600)),
        Family(lambda i, r: f"shop:search:index:{WORDS[i % 26]}-{i // 26}", "set", 100, (5, 50)),
        Family(lambda i, r: f"shop:auth:token:{_uuid(r)}", "string", 150, (40, 40), (600, 900)),
        Family(lambda i, r: f"shop:catalog:item:{i}:price", "string", 120, (2, 6)),
    ],
}


def _write(pipe, key: str, kind: str, size: int, ttl: int | None) -> None:
    if kind == "string":
        pipe.set(key, "x" * size)
    elif kind == "hash":
        pipe.hset(key, mapping={f"f{n}": "v" for n in range(size)})
    elif kind == "list":
        pipe.rpush(key, *[f"i{n}" for n in range(size)])
    elif kind == "set":
        pipe.sadd(key, *[f"m{n}" for n in range(size)])
    elif kind == "zset":
        pipe.zadd(key, {f"m{n}": n for n in range(size)})
    if ttl:
        pipe.expire(key, ttl)


def populate(client, name: str, seed: int = 7) -> set[str]:
    """Writes the keyspace `name` with its outliers; returns the outlier keys."""
    rng = random.Random(seed)
    pipe = client.pipeline(transaction=False)
    families = KEYSPACES[name]
    first: dict[int, str] = {}
    for at, family in enumerate(families):
        for i in range(family.count):
            key = family.name(i, rng)
            first.setdefault(at, key)
            ttl = rng.randint(*family.ttl) if family.ttl else None
            _write(pipe, key, family.type, rng.randint(*family.size), ttl)
    outliers = set()
    biggest = max(families, key=lambda f: f.count)
    # a wrong type under the largest pattern: a string where its keys are of another type
    wrong_family = next(f for f in families if f.count >= 100 and f.type != "string") if any(
        f.count >= 100 and f.type != "string" for f in families) else biggest
    wrong = wrong_family.name(99_000, rng)
    _write(pipe, wrong, "string" if wrong_family.type != "string" else "hash", 3, None)
    outliers.add(wrong)
    # a key without a TTL where every key of its pattern has one
    ttl_family = next((f for f in families if f.ttl and f.count >= 100), None)
    if ttl_family is not None:
        key = ttl_family.name(99_001, rng)
        _write(pipe, key, ttl_family.type, ttl_family.size[0], None)
        outliers.add(key)
    # an unknown namespace: a couple of keys nothing else looks like
    for n in (1, 2):
        key = f"zzlegacy:{n}"
        _write(pipe, key, "string", 5, None)
        outliers.add(key)
    # an over-size value: a string far above the others of its pattern
    string_family = next(f for f in families if f.type == "string" and f.count >= 100) if any(
        f.type == "string" and f.count >= 100 for f in families) else None
    if string_family is not None:
        key = string_family.name(99_002, rng)
        _write(pipe, key, "string", string_family.size[1] * 40, rng.randint(*string_family.ttl)
               if string_family.ttl else None)
        outliers.add(key)
    pipe.execute()
    return outliers
