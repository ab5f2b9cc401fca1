"""A cluster route's key owners (backends/cluster/owners.py), pure and compiled: for each command
whose name is given (a cluster route's commands whose one key is argument 1), the hash slot of
argument 1, two bytes, and that slot's byte in the route's slot table; NO_SLOT and 0 for other
commands. The compiled one has its own CRC16 (a table a byte, eight bytes a step): it must give
binascii.crc_hqx's, with Redis's hash-tag rule. (A RESP reader knows nothing of slots: these
moved here from resp/reader.py's Batch.)"""

from __future__ import annotations

import random
from binascii import crc_hqx

import hiredis
import pytest

from proxy.backends.cluster import owners as cluster_owners
from proxy.backends.cluster.owners import NO_SLOT
from proxy.backends.cluster.routing.slots import SLOT_COUNT, hash_slot
from proxy.resp.reader import RequestReader

pytestmark = pytest.mark.compiled_twin  # run again with the pure modules (tests/conftest.py)

NAMES = frozenset({b"GET", b"SET", b"MGET"})
# A slot table as a route keeps one: a connection's number for each slot (0: none yet).
TABLE = bytearray((slot * 7) % 256 for slot in range(SLOT_COUNT))


def twin(request, pure, built):
    if request.param == "pure":
        return pure
    if built is None:
        pytest.skip("the compiled key owners are not built")
    return built


@pytest.fixture(params=["pure", "compiled"])
def key_owners(request):
    return twin(request, cluster_owners.pure_key_owners, cluster_owners._compiled and cluster_owners._compiled.key_owners)


@pytest.fixture(params=["pure", "compiled"])
def key_owner(request):
    return twin(request, cluster_owners.pure_key_owner, cluster_owners._compiled and cluster_owners._compiled.key_owner)


@pytest.fixture
def key_slots(key_owners):
    """The slots alone, each owner byte checked against the table on the way."""
    def slots(commands, start, stop, names=NAMES):
        data = key_owners(commands, start, stop, names, TABLE)
        assert len(data) == 3 * (stop - start)
        found = []
        for at in range(0, len(data), 3):
            slot = int.from_bytes(data[at:at + 2], "big")
            assert data[at + 2] == (TABLE[slot] if slot != NO_SLOT else 0)
            found.append(slot)
        return found
    return slots


# Redis's own examples (cluster spec) and the edges of the tag rule; every length modulo 8, since
# the compiled CRC takes eight bytes a step, then two, then the last odd one alone.
TAGGED = [b"{user1000}.following", b"{user1000}.followers", b"foo{}{bar}", b"foo{{bar}}zap", b"foo{bar}{zap}",
          b"{", b"}", b"{}", b"}{", b"{a}", b"a{b", b"a}b{c}", b"", b"a", b"ab", b"abc", b"123456789",
          b"\x00\xff" * 40, b"{\x00}", "{ключ}:1".encode(), *(bytes(range(200, 200 + n)) for n in range(4, 20))]


def test_known_slots(key_slots):
    # the cluster spec's check value: CRC16("123456789") = 0x31C3
    assert key_slots([[b"GET", b"123456789"]], 0, 1) == [0x31C3 % SLOT_COUNT]
    assert key_slots([[b"GET", b"{user1000}.following"], [b"GET", b"{user1000}.followers"]], 0, 2) == \
        [hash_slot(b"user1000")] * 2


@pytest.mark.parametrize("key", TAGGED)
def test_the_hash_tag_rule(key_slots, key):
    assert key_slots([[b"GET", key]], 0, 1) == [hash_slot(key)]


@pytest.mark.parametrize("seed", range(20))
def test_random_keys_match_crc_hqx(key_slots, seed):
    rng = random.Random(seed)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 70))) for _ in range(300)]
    keys += [b"key:%d" % rng.randrange(10**12) for _ in range(100)]
    got = key_slots([[b"GET", key] for key in keys], 0, len(keys))
    assert got == [hash_slot(key) for key in keys]
    untagged = [key for key in keys if b"{" not in key]
    assert key_slots([[b"GET", key] for key in untagged], 0, len(untagged)) == \
        [crc_hqx(key, 0) % SLOT_COUNT for key in untagged]


def test_a_read_of_the_reader(key_slots):
    """What the readers make (tuples of bytes), from the start, the middle and the end of a batch."""
    commands = [("GET", "a"), ("PING",), ("SET", "{t}x", "v"), ("MGET", "b", "c"), ("EXEC",), ("GET", "")]
    batch = RequestReader().feed_read(b"".join(hiredis.pack_command(c) for c in commands))
    want = [hash_slot(b"a"), NO_SLOT, hash_slot(b"t"), hash_slot(b"b"), NO_SLOT, hash_slot(b"")]
    assert key_slots(batch.commands, 0, 6) == want
    assert key_slots(batch.commands, 2, 4) == want[2:4]
    assert key_slots(batch.commands, 3, 3) == []
    assert cluster_owners.key_owners(batch.commands, 1, 6, NAMES, TABLE) == \
        cluster_owners.pure_key_owners(batch.commands, 1, 6, NAMES, TABLE)


def test_only_the_names_given_have_a_slot(key_slots):
    """A name is looked up once for a run of commands that share it: runs of one name, then
    another, then the first again, each with its own answer."""
    commands = [[b"GET", b"a"], [b"GET", b"b"], [b"HSET", b"a"], [b"HSET", b"b"], [b"GET", b"c"], [b"get", b"d"],
                [b"EXISTS", b"e"], [b"GET", b"f"]]
    assert key_slots(commands, 0, len(commands)) == [hash_slot(b"a"), hash_slot(b"b"), NO_SLOT, NO_SLOT,
                                                     hash_slot(b"c"), NO_SLOT, NO_SLOT, hash_slot(b"f")]
    assert key_slots(commands, 0, len(commands), frozenset()) == [NO_SLOT] * len(commands)
    assert key_slots(commands, 2, 4, {b"HSET"}) == [hash_slot(b"a"), hash_slot(b"b")]


def test_one_command_a_call_with_the_names_of_another_call(key_slots):
    """Calls of one command each, as a route's one-command reads make: the same name object in
    the same set from call to call (the compiled one remembers the last answer), then in another
    set that says otherwise, in a set that changes between calls, and back."""
    get = b"GET"
    others = frozenset({b"SET"})
    changing = {get}
    calls = [(NAMES, hash_slot(b"a")), (NAMES, hash_slot(b"a")), (others, NO_SLOT), (NAMES, hash_slot(b"a")),
             (frozenset(NAMES), hash_slot(b"a")), (changing, hash_slot(b"a")), (changing, NO_SLOT),
             (changing, NO_SLOT), (NAMES, hash_slot(b"a"))]
    for number, (names, slot) in enumerate(calls):
        if number == 6:
            changing.discard(get)
        assert key_slots([[get, b"a"]], 0, 1, names) == [slot], number
    assert key_slots([[bytes(bytearray(b"GET")), b"a"]], 0, 1, others) == [NO_SLOT]  # an equal name, another object


@pytest.mark.parametrize("seed", range(5))
def test_one_command_as_a_number(key_owner, seed):
    """key_owner(commands, at): key_owners' three bytes of command `at` as (slot << 8) | owner,
    on tagged, random and keyless commands, names given or not, in calls that change the names."""
    rng = random.Random(seed)
    commands = [[rng.choice([b"GET", b"SET", b"HSET", b"get"]), key] for key in TAGGED]
    commands += [(b"GET", b"k%d" % rng.randrange(10**9)) for _ in range(50)]
    commands += [[b"PING"], [], [b"GET", "text"], (b"GET",), [b"MGET", b"a", b"b"]]
    for at in rng.sample(range(len(commands)), len(commands)):
        names = rng.choice([NAMES, frozenset(), {b"HSET"}])
        want = cluster_owners.pure_key_owners(commands, at, at + 1, names, TABLE)
        assert key_owner(commands, at, names, TABLE) == int.from_bytes(want, "big"), commands[at]
    batch = RequestReader().feed_read(b"".join(hiredis.pack_command(("GET", "k%d" % n)) for n in range(3)))
    assert key_owner(batch.commands, 2, NAMES, TABLE) == \
        int.from_bytes(cluster_owners.key_owners(batch.commands, 2, 3, NAMES, TABLE), "big")
    assert key_owner([[b"PING"]], 0, NAMES, TABLE) == NO_SLOT << 8
    # What a cluster route calls for a read of one command: the compiled function when built.
    assert cluster_owners.key_owner_of is (cluster_owners._compiled.key_owner if cluster_owners._compiled else cluster_owners.pure_key_owner)


@pytest.mark.parametrize("at", [-1, 2])
def test_one_command_out_of_range_or_a_table_of_another_size(key_owner, at):
    with pytest.raises(IndexError):
        key_owner([[b"GET", b"a"], [b"GET", b"b"]], at, NAMES, TABLE)
    with pytest.raises(ValueError):
        key_owner([[b"GET", b"a"]], 0, NAMES, bytearray(SLOT_COUNT - 1))


def test_a_slot_table_of_another_size_is_refused(key_owners):
    with pytest.raises(ValueError):
        key_owners([[b"GET", b"a"]], 0, 1, NAMES, bytearray(SLOT_COUNT - 1))


def test_what_has_no_bytes_at_argument_1(key_slots):
    commands = [[b"PING"], [], (b"GET", b"k"), [b"GET", "text"], [b"GET", 7], (b"GET",)]
    assert key_slots(commands, 0, len(commands)) == [NO_SLOT, NO_SLOT, hash_slot(b"k"), NO_SLOT, NO_SLOT, NO_SLOT]


@pytest.mark.parametrize("start, stop", [(-1, 1), (0, 3), (2, 1)])
def test_out_of_range_is_refused(key_owners, start, stop):
    with pytest.raises(IndexError):
        key_owners([[b"GET", b"a"], [b"GET", b"b"]], start, stop, NAMES, TABLE)


@pytest.fixture(params=["pure", "compiled"])
def owner_parts(request):
    return twin(request, cluster_owners.pure_owner_parts, cluster_owners._compiled and cluster_owners._compiled.owner_parts)


def parts_from_key_owners(commands, start, stop, names, table):
    """What owner_parts must give, from key_owners' bytes: None when a command has no owner."""
    found = cluster_owners.pure_key_owners(commands, start, stop, names, table)
    owners = [found[at + 2] for at in range(0, len(found), 3)]
    if 0 in owners:
        return None
    firsts = list(dict.fromkeys(owners))
    return (bytearray(firsts.index(owner) for owner in owners), bytes(firsts),
            [owners.count(owner) for owner in firsts])


# Tables of owners: few (a cluster of three), many (each of the 255 owner numbers), and one
# where some slots have no owner yet (0).
OWNER_TABLES = {
    "three": bytearray(1 + slot * 3 // SLOT_COUNT for slot in range(SLOT_COUNT)),
    "all-255": bytearray(1 + slot % 255 for slot in range(SLOT_COUNT)),
    "some-unknown": bytearray((slot % 4) for slot in range(SLOT_COUNT)),
}


@pytest.mark.parametrize("table", OWNER_TABLES.values(), ids=OWNER_TABLES.keys())
@pytest.mark.parametrize("seed", range(6))
def test_parts_by_owner_as_key_owners_gives_them(owner_parts, table, seed):
    """Random stretches (keys of every owner, runs of one owner, a keyless or unknown command
    somewhere or nowhere): the parts numbered as their owners first come, with their counts."""
    rng = random.Random(seed)
    keys = [b"k%d" % rng.randrange(10**9) for _ in range(rng.randrange(1, 600))]
    keys[rng.randrange(len(keys)):] = [b"{same}%d" % n for n in range(rng.randrange(0, 5))] or keys[-1:]
    commands = [[rng.choice([b"GET", b"SET"]), key] for key in keys]
    if seed % 2:
        commands.insert(rng.randrange(len(commands)), rng.choice([[b"PING"], [b"HSET", b"k"], (b"GET",)]))
    for start, stop in [(0, len(commands)), (1, len(commands) - 1), (0, 1), (2, 2)]:
        if start <= stop:
            assert owner_parts(commands, start, stop, NAMES, table) == \
                parts_from_key_owners(commands, start, stop, NAMES, table), (start, stop)


def test_parts_of_a_read(owner_parts):
    """On what the reader makes; one owner is one part."""
    table = OWNER_TABLES["three"]
    commands = [("GET", "{a}1"), ("SET", "{b}1", "v"), ("GET", "{a}2"), ("GET", "{c}1"), ("GET", "{b}2")]
    batch = RequestReader().feed_read(b"".join(hiredis.pack_command(c) for c in commands))
    got = cluster_owners.owner_parts(batch.commands, 0, 5, NAMES, table)
    assert got == parts_from_key_owners(batch.commands, 0, 5, NAMES, table)
    order, owners, counts = got
    slots = [hash_slot(tag) for tag in (b"a", b"b", b"a", b"c", b"b")]
    assert [owners[part] for part in order] == [table[slot] for slot in slots]
    assert sum(counts) == 5 and len(owners) == len(set(owners)) == len(counts)
    assert owner_parts([[b"GET", b"{a}1"], [b"GET", b"{a}2"]], 0, 2, NAMES, table) == \
        (bytearray(2), bytes([table[hash_slot(b"a")]]), [2])
    assert owner_parts([[b"GET", b"a"], [b"PING"]], 0, 2, NAMES, table) is None


def test_parts_out_of_range_or_a_table_of_another_size(owner_parts):
    with pytest.raises(IndexError):
        owner_parts([[b"GET", b"a"]], 0, 2, NAMES, TABLE)
    with pytest.raises(ValueError):
        owner_parts([[b"GET", b"a"]], 0, 1, NAMES, bytearray(SLOT_COUNT - 1))
